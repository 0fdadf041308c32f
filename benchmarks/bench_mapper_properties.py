import random, json, sys
import accel_sim
from accel_sim.arch.load import arch_from_dict, list_archs, load_arch
sys.path.insert(0,'tests')
from test_mapper_properties import _more, _variant, PRECISION, _runs
rng=random.Random(int(sys.argv[1]))
archs=list_archs(); flows=list(PRECISION)
worst=[]
for i in range(int(sys.argv[2])):
    a=rng.choice(archs); f=rng.choice(flows)
    if not _runs(a,f): continue
    M,K,N=(rng.randint(1,2048) for _ in range(3))
    kind=sys.argv[3]
    base=accel_sim.simulate(a,(M,K,N),f).cycles
    if kind=='hw':
        what=rng.choice(["capacity","bandwidth","buffers","rate"]); lvl=rng.randint(0,7)
        more=accel_sim.simulate(_variant(a, lambda d: _more(d,what,lvl)),(M,K,N),f).cycles
        r=more/base-1; tag=(what,lvl)
    else:
        d=rng.choice("MKN"); big={"M":(M+1,K,N),"K":(M,K+1,N),"N":(M,K,N+1)}[d]
        more=accel_sim.simulate(a,big,f).cycles; r=1-more/base; tag=d
    if r>0: worst.append((r,a,f,(M,K,N),tag,base,more))
worst.sort(reverse=True)
for w in worst[:12]: print('%.3f%%'%(100*w[0]), w[1:])
print(len(worst),'violations')
