"""Executor: run plan documents inside torch.distributed jobs (needs the ``executor`` extra).

Public API::

    from syncplan.executor import PlanComm, PlanExecutor, fused_allreduce, plan_allreduce_hook

    comm = PlanComm(PlanExecutor(plan_doc))              # after init_process_group
    model.register_comm_hook(comm, plan_allreduce_hook)  # DDP
    fused_allreduce(grads, comm, average=True)           # or a plain loop

    with distributed():                                  # under torchrun
        comm = init_plan_comm()                          # fetch the job's plan (SYNCPLAN_*)

``run_local`` runs a function in N local gloo processes. The names load on first use, so
importing one executor module does not import the others.
"""

from __future__ import annotations

from syncplan.core.lazy import lazy_getattr

_LAZY = {
    "PlanComm": "syncplan.executor.comm",
    "PlanExecutor": "syncplan.executor.engine",
    "ExecutorConfig": "syncplan.executor.engine",
    "ExecutorError": "syncplan.executor.engine",
    "LaunchConfig": "syncplan.executor.launch",
    "FetchError": "syncplan.executor.launch",
    "distributed": "syncplan.executor.launch",
    "fetch_plan": "syncplan.executor.launch",
    "init_plan_comm": "syncplan.executor.launch",
    "fused_allreduce": "syncplan.executor.ddp",
    "plan_allreduce_hook": "syncplan.executor.ddp",
    "LocalRunConfig": "syncplan.executor.localrun",
    "run_local": "syncplan.executor.localrun",
    "PlanError": "syncplan.core.document",
    "PlanDocument": "syncplan.core.document",
}

__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = sorted(_LAZY)
