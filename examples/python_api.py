"""The Python API end to end: load a topology, plan, verify, run the plan in 4 local gloo
processes with the executor, and check it against torch's all_reduce.

    python3 examples/python_api.py        # from the repository root; needs torch
"""

from __future__ import annotations

from pathlib import Path

from syncplan.planner import load_topology, make_plan, verify_plan

TOPOLOGY = Path(__file__).with_name("star-one-slow.json")  # 4 single-CPU hosts, one slow


def worker(plan: dict) -> float:
    """Runs in each of the 4 processes (process group already up): the largest difference
    between the plan's sum and torch's."""
    import torch
    import torch.distributed as dist

    from syncplan.executor import PlanComm, PlanExecutor, fused_allreduce

    comm = PlanComm(PlanExecutor(plan))  # rank i of the group plays the plan's rank i
    grads = [torch.randn(1000, generator=torch.Generator().manual_seed(dist.get_rank() + k))
             for k in range(3)]
    expected = [g.clone() for g in grads]
    fused_allreduce(grads, comm)  # sums every tensor over the group through the plan
    for e in expected:
        dist.all_reduce(e)  # torch's own, for comparison
    return max(float((g - e).abs().max()) for g, e in zip(grads, expected, strict=True))


def main() -> None:
    from syncplan.executor import LocalRunConfig, run_local

    topo = load_topology(TOPOLOGY)
    ranks = topo.endpoints()
    plan = make_plan(topo, ranks, 64 << 20, algorithm="auto")
    report = verify_plan(plan, topo)
    assert report.ok, report.error
    print(f"plan {plan['plan_id']}: {plan['algorithm']} over {len(ranks)} ranks, predicted "
          f"{plan['predicted_time_s'] * 1e3:.1f} ms for 64 MiB, lower bound "
          f"{plan['lower_bound_time_s'] * 1e3:.1f} ms; verified")
    errors = run_local(worker, (plan,), LocalRunConfig(nprocs=len(ranks)))
    print(f"ran on {len(ranks)} gloo processes: max difference from torch's all_reduce "
          f"{max(errors):.2e}")
    assert max(errors) < 1e-4


if __name__ == "__main__":
    main()
