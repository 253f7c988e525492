import json, sys
sys.path.insert(0,'/tmp/ana')
from crc import crc32c
from restored import restored_lists
ops=[json.loads(l) for l in open('/work/bugdata/waymark-nemesis-6816/history.jsonl')]
r=restored_lists()
app={}  # elem -> (T, op)
for i,o in enumerate(ops):
    for m in o['micro']:
        if 'append' in m: app[m['append']['elem']]=(i,o,m['append']['key'])
for k in range(56):
    p=crc32c(f'list{k}'.encode())%64
    lst=r.get(k,[])
    inc=set(lst)
    oks=[(app_o['complete_ms'],e,i) for e,(i,app_o,kk) in app.items() if kk==k and app_o['outcome']=='ok']
    miss=[(c,e,i) for c,e,i in oks if e not in inc]
    lastin=max((app[e][1]['complete_ms'] for e in lst if e in app), default=None)
    firstmiss=min(miss) if miss else None
    print(f'list{k:<3} p={p:<2} p%3={p%3} restored={len(lst):<4} ok_appends={len(oks):<4} ok_missing={len(miss):<4} latest_included_completed={lastin} first_missing={firstmiss}')
