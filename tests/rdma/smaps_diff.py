import sys,re
def load(p):
    out={}; cur=None
    for line in open(p):
        if re.match(r'^[0-9a-f]+-[0-9a-f]+ ',line):
            parts=line.split()
            name=parts[5] if len(parts)>5 else '[anon]'
            a,b=parts[0].split('-'); size=(int(b,16)-int(a,16))//1024
            cur=(name,size,parts[0]); out[cur]={}
        elif cur and ':' in line:
            k,v=line.split(':',1); v=v.split()
            if v and v[0].isdigit(): out[cur][k]=int(v[0])
    return out
a=load(sys.argv[1]); b=load(sys.argv[2])
agg={}
for d,sign in ((a,-1),(b,1)):
    for (name,size,rng),f in d.items():
        key=(name,size) if name!='[anon]' else ('[anon]',size)
        agg.setdefault(key,0); agg[key]+=sign*f.get('Rss',0)
for k,v in sorted(agg.items(),key=lambda x:-abs(x[1]))[:15]:
    if v: print(f"{v:8d} KiB  {k}")
