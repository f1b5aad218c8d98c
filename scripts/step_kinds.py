"""Steps by drafters charged over one workload of the traces (neural column chosen): steps / mean drafted / mean accepted per kind, and the speedup."""
import sys, glob, collections
import numpy as np
from specplug.lab.trace import read_traces
from specplug.lab.bench._neural import with_neural_column
from specplug.lab.bench._methods import parse_method, build
from specplug.lab.bench._replay import replay, kind_names
from specplug.lab.bench._run import _speedup
from specplug.cost import cost_model
column, workload, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
records = [r for p in sorted(glob.glob('specplug/lab/data/traces/*.jsonl')) for r in with_neural_column(read_traces(p), column, p)]
group = [r for r in records if r.workload == workload]
model = cost_model('llama-3.1-8b-h100')
for spec in sys.argv[4:]:
    built = build(parse_method(spec), group, model, batch, 0.6)
    logs = replay(built.proposer, built.leaves, group, 8)
    stats = collections.defaultdict(lambda: [0, 0, 0])
    for log in logs:
        for d, a, k in zip(log.drafted.tolist(), log.accepted.tolist(), log.kinds.tolist()):
            s = stats['+'.join(kind_names(k)) or 'none']; s[0] += 1; s[1] += d; s[2] += a
    print(f"{spec:32s} x{_speedup(logs, model, batch):.3f}", '; '.join(f"{n}: {c} / {d/c:.2f} / {a/c:.2f}" for n, (c, d, a) in sorted(stats.items())))
