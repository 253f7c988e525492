import struct, sys, os, re
def varint(b, i):
    r = 0; s = 0
    while True:
        x = b[i]; i += 1
        r |= (x & 0x7f) << s; s += 7
        if not x & 0x80: return r, i
def frames(path):
    data = open(path,'rb').read()
    base = struct.unpack_from('<Q', data, 12)[0]
    i = 24
    while i + 9 <= len(data):
        ln, crc, kind = struct.unpack_from('<IIB', data, i)
        if ln == 0 and kind == 0: break
        payload = data[i+9:i+9+ln]
        if len(payload) < ln: break
        yield base + i, kind, payload
        i += 9 + ln
NAMES = {1:'Boot',2:'TxPrepared',3:'TxCommitted',4:'TxRolledBack',5:'TxDecided',6:'CutStart',7:'CutFinish',8:'CutBegin',9:'CutEnd',10:'Alteration',11:'AlterClone',12:'AlterTerm',13:'AlterApplied',18:'PartitionReset',19:'Copied'}
def describe(kind, p):
    v, i = varint(p, 0)
    if kind in (6, 7, 1, 12):
        a, i = varint(p, i); return f'{a}'
    if kind == 18:
        part, i = varint(p, i); n, i = varint(p, i); since, i = varint(p, i)
        return f'p={part} since={since}'
    if kind == 19:
        part, i = varint(p, i); n, i = varint(p, i)
        keys = sorted(set(re.findall(rb'list\d+', p)))
        return f'p={part} writes={n} keys={[k.decode() for k in keys]}'
    if kind in (13, 11, 10):
        s = re.findall(rb'(?:placement|cut|host)/[\w@]+[\x00-\xff]{0,1}', p)
        strs = re.findall(rb'[ -~]{4,}', p)
        return ' '.join(x.decode() for x in strs)[:300]
    if kind in (2, 3):
        keys = sorted(set(re.findall(rb'list\d+', p)))
        return ','.join(k.decode() for k in keys)
    return ''
if __name__ == '__main__':
    d = sys.argv[1]
    for f in sorted(os.listdir(d)):
        for off, kind, p in frames(os.path.join(d, f)):
            print(off, NAMES.get(kind, kind), describe(kind, p))
