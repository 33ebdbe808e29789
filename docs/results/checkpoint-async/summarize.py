#!/usr/bin/env python3
# Summarizes output.txt (run.sh, two builds, two rounds) as the table of README.md.
import re, sys
text=open(sys.argv[1]).read()
blocks=re.split(r'######## ',text)[1:]
rows=[]
for b in blocks:
    head=b.split('\n')[0]
    build='old' if 'old66' in head else 'new'
    rnd=re.search(r'round (\d)',head).group(1)
    for run in b.split('# dct-bench checkpoint: ')[1:]:
        m=re.match(r'(\d) ranks x (\d+) MiB.*? in (/\S+?)/dct',run)
        ranks,mib,d=m.groups()
        def g(name, col=1):
            line=[l for l in run.split('\n') if l.startswith(name)][0]
            return line
        save=g('DCT_Checkpoint_save').split()
        fs=g('  vs collective write + fsync').split()
        isw=g('DCT_Checkpoint_isave + wait').split()
        call=re.search(r'\(([\d.]+) s; save ([\d.]+) s\)',g('  the isave call alone'))
        cost=re.search(r'([\d.-]+) s \(save\)\s+([\d.-]+) s \(isave\): ([\d.-]+)',g("checkpoint's cost"))
        blocked=re.search(r'blocked in the save ([\d.]+)',g('save, steps')).group(1)
        bl2=re.search(r'isave ([\d.]+) s \+ wait ([\d.]+) s',g('isave, steps, wait'))
        rows.append((f"{ranks}x{mib} {d}",build,rnd,save[2],save[3],fs[-1],isw[4],call.group(1),call.group(2),blocked,bl2.group(1),bl2.group(2),cost.group(1),cost.group(2),cost.group(3)))
print("| setting | build | round | save/plain coll | save/plain indep | save/plain+fsync | isave+wait/plain coll | isave call s | save s | blocked: save s | blocked: isave s + wait s | cost to 4 steps: save s | isave s | ratio |")
print("|"+"---|"*15)
for r in sorted(rows,key=lambda r:(r[0],r[1],r[2])):
    print("| "+" | ".join(r[:10])+f" | {r[10]} + {r[11]} | "+" | ".join(r[12:])+" |")
