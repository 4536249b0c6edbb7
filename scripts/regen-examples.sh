#!/usr/bin/env bash
# Rebuild every derived file of docs/examples/ (fits, comparisons, plans, reports) from the committed runs,
# with the commands each example's README names. Run from the repo root after a change to rlscale fit/plan.
set -euo pipefail
E=docs/examples
fit() { python -m rlscale.cli fit "$@" --x flops; }
for D in $E/smollm2-headroom $E/smollm2-loo; do
  fit "$D" && python -m rlscale.cli report --html "$D"
done
D=$E/smollm2-scale
fit $D && python -m rlscale.cli report --html $D
for p in 25 50; do fit $D --fit-until $p% --out $D/fit-until-$p; done
python -m rlscale.cli plan $D --budget 5e15 --x flops
python -m rlscale.cli plan $D --budget 5e15 --x flops --fit-until 50% --out $D/fit-until-50
D=$E/smollm2-sums-loo
fit $D && python -m rlscale.cli report --html $D
for p in 25 50; do fit $D --fit-until $p% --out $D/fit-until-$p; done
python -m rlscale.cli report --html $D/fit-until-50
D=$E/smollm2-sums-loo-long
fit $D && python -m rlscale.cli report --html $D
for p in 25 50; do fit $D --fit-until $p% --out $D/fit-until-$p; done
python -m rlscale.cli report --html $D/fit-until-50
D=$E/smollm2-sums-scale
fit $D && python -m rlscale.cli report --html $D
for p in 25 50; do fit $D --fit-until $p% --out $D/fit-until-$p; done
python -m rlscale.cli plan $D --budget 2.6e15 --x flops
python -m rlscale.cli plan $D --budget 2.6e15 --x flops --fit-until 50% --out $D/fit-until-50
D=$E/smollm2-sums-long
fit $D && python -m rlscale.cli report --html $D
for p in 25 50; do fit $D --fit-until $p% --out $D/fit-until-$p; done
python -m rlscale.cli report --html $D/fit-until-50
python -m rlscale.cli plan $D --budget 5.2e15 --x flops
python -m rlscale.cli plan $D --budget 5.2e15 --x flops --fit-until 50% --out $D/fit-until-50
python -m rlscale.cli plan $E/smollm2-sums-scale --budget 5.2e15 --x flops --out $D/plan-from-sums-scale
D=$E/smollm2-sums-long-pool
fit $D && python -m rlscale.cli report --html $D
for p in 25 50; do fit $D --fit-until $p% --out $D/fit-until-$p; done
python -m rlscale.cli plan $D --budget 3.6e15 --x flops
D=$E/smollm2-sums-tail
fit $D && python -m rlscale.cli report --html $D
for p in 25 50; do fit $D --fit-until $p% --out $D/fit-until-$p; done
