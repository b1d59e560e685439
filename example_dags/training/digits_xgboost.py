"""Distributed gradient boosting of a digits classifier with XGBoost's collective (CPU).

Run as the command of every Master and Worker replica of an XGBoostJob. The operator injects
MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK into every replica (WORKER_PORT and WORKER_ADDRS too,
which only LightGBM needs). The Master replica starts XGBoost's tracker on MASTER_ADDR:MASTER_PORT
and then trains like every other replica: all WORLD_SIZE processes join the tracker as workers,
each with its own shard of the training rows, and build every tree together (histograms are summed
across replicas), so each ends with the same model. Without MASTER_ADDR it trains alone.

Output (Katib StdOut format, from every replica; evaluation results are already combined over all
replicas): ``round=N train-mlogloss=... train-merror=...`` every ``--log_every`` rounds and
``test_accuracy=... test_mlogloss=...`` at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import sys
from typing import Any

import numpy as np
import xgboost as xgb
from digits_common import SEED, Rendezvous, emit, exit_code, load_digits_split, write_result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Hyperparameters arrive as ``--key=value`` (the operator's and Katib's convention)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--num_rounds", type=int, default=30)
    parser.add_argument("--max_depth", type=int, default=4)
    parser.add_argument("--learning_rate", type=float, default=0.3, help="XGBoost's eta")
    parser.add_argument("--log_every", type=int, default=10, help="print the training metrics every N rounds")
    parser.add_argument("--model_dir", default="", help="where the master exports the model")
    return parser.parse_args(argv)


def train(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    rv = Rendezvous.from_env()

    from xgboost import collective
    from xgboost.tracker import RabitTracker

    tracker = None
    if rv.world_size > 1 and rv.is_master:
        # The tracker only introduces the workers to each other and hands out ranks; it runs on
        # threads inside the Master process. timeout bounds the wait for every worker to join.
        tracker = RabitTracker(
            n_workers=rv.world_size,
            host_ip=_listen_address(rv.addr),
            port=rv.port,
            sortby="task",
            timeout=300,
        )
        tracker.start()
    communicator: dict[str, Any] = (
        {
            "dmlc_tracker_uri": rv.addr,
            "dmlc_tracker_port": rv.port,
            # Ranks sorted by task id: the collective's rank equals the operator's RANK.
            "dmlc_task_id": f"{rv.rank:06d}",
            # A Worker may start before the Master's tracker listens (XGBoostJob, unlike PyTorchJob, has
            # no init container waiting for the Master); xgboost waits 2 s longer after each refusal.
            "dmlc_retry": 30,
        }
        if rv.world_size > 1
        else {}
    )

    data = load_digits_split()
    result: dict[str, Any] = {}
    alone = contextlib.nullcontext()
    with collective.CommunicatorContext(**communicator) if communicator else alone:
        rank, world = collective.get_rank(), collective.get_world_size()
        print(f"{rv}: collective rank {rank} of {world}, tracker {rv.addr}:{rv.port}", flush=True)
        # Row-wise sharding: this replica's slice of the training split.
        dtrain = xgb.DMatrix(data.x_train[rank::world], label=data.y_train[rank::world])
        params = {
            "objective": "multi:softprob",
            "num_class": 10,
            "tree_method": "hist",
            "max_depth": args.max_depth,
            "eta": args.learning_rate,
            "eval_metric": ["mlogloss", "merror"],
            "nthread": 1,
            "seed": SEED,
        }
        booster = xgb.train(
            params,
            dtrain,
            num_boost_round=args.num_rounds,
            evals=[(dtrain, "train")],
            verbose_eval=False,
            callbacks=[KatibLines(args.log_every, args.num_rounds, result)],
        )
        # Every replica holds the same trees, so each evaluates the whole test split on its own.
        proba = booster.predict(xgb.DMatrix(data.x_test))
        test_accuracy = float(np.mean(proba.argmax(axis=1) == data.y_test))
        picked = proba[np.arange(len(data.y_test)), data.y_test]
        test_mlogloss = float(-np.mean(np.log(np.clip(picked, 1e-15, 1.0))))
        emit(test_accuracy=test_accuracy, test_mlogloss=test_mlogloss)
        result.update(test_accuracy=test_accuracy, test_mlogloss=test_mlogloss)
        if args.model_dir and rv.is_master:
            write_result(args.model_dir, result)
            booster.save_model(f"{args.model_dir}/model.json")
            print(f"model saved to {args.model_dir}", flush=True)
    if tracker is not None:
        # Returns once every worker has finalized its communicator: the Master leaves last.
        tracker.wait_for(timeout=120)
    return result


def _listen_address(master_addr: str) -> str:
    """Where the tracker listens: the given address when it is an IP (the local cluster's 127.0.0.1),
    else every interface. On a cluster MASTER_ADDR is the Master's own headless Service name, which
    resolves only once the pod is Ready, so the Master must not need to look it up to start listening."""
    try:
        ipaddress.ip_address(master_addr)
    except ValueError:
        return "0.0.0.0"
    return master_addr


class KatibLines(xgb.callback.TrainingCallback):
    """Prints the evaluation results as Katib metric lines every ``every`` rounds and after the last."""

    def __init__(self, every: int, rounds: int, result: dict[str, Any]) -> None:
        super().__init__()
        self.every, self.rounds, self.result = max(1, every), rounds, result

    def after_iteration(self, model: Any, epoch: int, evals_log: dict[str, dict[str, list[float]]]) -> bool:
        done = epoch + 1
        if done % self.every == 0 or done == self.rounds:
            values = {
                f"{data}-{name}": series[-1]
                for data, metrics in evals_log.items()
                for name, series in metrics.items()
            }
            emit(round=done, **values)
            self.result.update(round=done, **values)
        return False


if __name__ == "__main__":
    sys.exit(exit_code(train))
