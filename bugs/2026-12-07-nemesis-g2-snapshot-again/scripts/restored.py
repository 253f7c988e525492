import re, json
def varint(b, i):
    r = 0; s = 0
    while True:
        x = b[i]; i += 1
        r |= (x & 0x7f) << s; s += 7
        if not x & 0x80: return r, i
def restored_lists(root='/work/bugdata/waymark-nemesis-6816/restored'):
    out = {}
    for n in (1,2,3):
        d = open(f'{root}/node{n}/data/vnodes/store0@node{n}/checkpoint','rb').read()
        for m in re.finditer(rb'list(\d+)', d):
            s = m.start()
            if d[s-1] != len(m.group(0)): continue
            i = m.end()
            tag = d[i]; i += 1
            ln, i = varint(d, i)
            val = d[i:i+ln]
            if not re.fullmatch(rb'(\d+,)*', val): print('odd', n, m.group(0), tag, val[:40]); continue
            k = int(m.group(1))
            lst = [int(x) for x in val.decode().split(',') if x]
            if k in out and out[k] != lst: print('disagree', k)
            out[k] = lst
    return out
if __name__ == '__main__':
    r = restored_lists()
    for k in sorted(r): print(k, len(r[k]), r[k][-3:])
