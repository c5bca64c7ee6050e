"""The job layer: every child process fabricbench starts, resumes, times out and keeps secrets from.

    from fabricbench import jobs
    with jobs.workspace("train-ddp") as ws:
        outcome = jobs.run(argv, workspace=ws, fabric=fabric, stall_s=20, on_record=handle)

Every orchestrator goes through here: `sweep --fabric`, `compare`, `scaling` (measuring/child.py), `sweep
--nprocs N`'s ranks (measuring/launch.py: one job of N named processes), `train`'s torchrun
(training/launch.py), `study`'s units (studying/runner.py), `qualify`'s measuring units
(qualifying/children.py) and the relate lab (relating/lab.py). What lives where:
- runner.py: the one child runner (fabric applied, process group dead with us, records streamed back over
  one channel, stall timeout naming the process that stopped answering, total budget, no leftovers; a
  job of several processes ends when one fails, naming the cause);
- channel.py: the child's side of that channel (records, progress, why it failed, its pulse);
- heartbeat.py: the ranks' store heartbeat across nodes and the stall watchdog that reads it;
- liveness.py: which of the two says what, and DEAD_AFTER_S, the one bound for "silence means dead";
- signals: procs.install/Terminated (SIGINT -> exit 130, SIGTERM -> 143, what was measured kept, one line);
- secrets.py: a fabric travels to children through their environment, never their argv; values outside
  NCCL_*/GLOO_*/CUDA_* are shown as *** everywhere else;
- store.py: the one resume store (a torn last line is cut off, with a warning, and measured again);
- configs.py: typed, frozen job configs whose argv comes from their fields, with a stable resume key.
- command.py: `fabricbench exec`, a user's own command run under a fabric as a job (user_job: signals
  forwarded, what it left in sessions of its own killed), one record of kind "exec" (kinds.py).

Where decisions live (docs/layout.md's rule, for this layer): a command
decides *what* to run (its library call builds the job); this layer decides *how* a child runs, for every
command alike. So a new orchestrator starts its children with jobs.run and never with subprocess or
procs directly; a new child option is a config field (configs.py), never a flag list; a resume reads
through store.py; a fabric reaches a child by name (fabrics.env.carry). Layering: jobs imports fabrics,
procs and results, and nothing above (measuring, training, study, qualifying and cli import jobs).
"""

from __future__ import annotations

from fabricbench import lazy

# Loaded on first use: `import fabricbench.jobs.channel` (in every training rank) must not pay for the
# runner's imports (fabrics, results).
_LAZY = {"Outcome": "fabricbench.jobs.runner", "run": "fabricbench.jobs.runner",
         "workspace": "fabricbench.jobs.runner", "Terminated": "fabricbench.procs",
         "ResumeStore": "fabricbench.jobs.store"}

__all__ = sorted(_LAZY)


__getattr__ = lazy.attributes(__name__, _LAZY)
