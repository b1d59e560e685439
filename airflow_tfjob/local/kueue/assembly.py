"""Wires the Kueue emulation into one local cluster: its webhook in front of the store's admission, its
kinds, v1beta1 view and visibility API on the API server, its objects created at start, and its
controller on the cluster's loop, and the manager's ConfigMap a release install leaves (its
``integrations.frameworks`` the options' integrations: what the provider's preflight reads)."""

from __future__ import annotations

from typing import Any

import yaml

from airflow_tfjob.local.apiserver.extensions import Extensions
from airflow_tfjob.local.kueue.controller import KueueController
from airflow_tfjob.local.kueue.convert import VIEWS
from airflow_tfjob.local.kueue.jobs import KueueWebhook, Management
from airflow_tfjob.local.kueue.options import KUEUE_PLURALS, MANAGER_NAMESPACE, KueueOptions, kinds_managed
from airflow_tfjob.local.kueue.reasons import Reasons
from airflow_tfjob.local.kueue.startobjects import create_object
from airflow_tfjob.local.kueue.visibility import VisibilityApi
from airflow_tfjob.local.model.resources import ApiError
from airflow_tfjob.local.store.core import Admission, Store

MANAGER_CONFIG = "kueue-manager-config"
MANAGER_CONFIG_KEY = "controller_manager_config.yaml"


class Kueue:
    def __init__(self, options: KueueOptions) -> None:
        self.options = options
        self._webhook = KueueWebhook(None, ())

    def webhook(self, inner: Admission | None) -> KueueWebhook:
        self._webhook = KueueWebhook(inner, kinds_managed(self.options), Management.of(self.options))
        return self._webhook

    def controller(self, store: Store, reasons: Reasons | None = None) -> KueueController:
        """`reasons`: the QuotaReserved=False reasons the profile's Kueue writes (0.19's fallbacks by default)."""
        self._webhook.store = store
        return KueueController(store, self.options, reasons)

    @staticmethod
    def extensions(controller: KueueController) -> Extensions:
        """The Kueue kinds, and the MultiKueue ones only when asked for (KueueOptions.multikueue): a
        cluster with Kueue alone serves what it served before MultiKueue was emulated."""
        visibility = VisibilityApi(controller.store, controller.scheduler)
        features = frozenset({"kueue", "multikueue"} if controller.options.multikueue else {"kueue"})
        return Extensions(features=features, views=VIEWS, aggregated={visibility.group: visibility})

    def create_objects(self, store: Store) -> None:
        """The manager's configuration, then the configured Kueue objects, in order, each as
        startobjects.create_object makes it (what a `--kueue-objects` file was checked with before); a bad
        one is a ValueError naming it."""
        self._create_manager_config(store)
        for i, obj in enumerate(self.options.objects):
            kind = obj.get("kind")
            if kind not in KUEUE_PLURALS:
                raise ValueError(f"kueue objects[{i}]: kind {kind!r} is not one the emulation creates at start; "
                                 "use ResourceFlavor, ClusterQueue, LocalQueue or WorkloadPriorityClass")
            try:
                create_object(store, obj)
            except ApiError as exc:
                raise ValueError(f"kueue objects[{i}] ({kind} {(obj.get('metadata') or {}).get('name')!r}): "
                                 f"{exc.message}") from None

    def _create_manager_config(self, store: Store) -> None:
        """kueue-system/kueue-manager-config as the release manifests ship it (docs/reference/
        kueue-behaviour.md §9.2), with the emulation's integrations in `integrations.frameworks`, and
        `manageJobsWithoutQueueName` and `managedJobsNamespaceSelector` when the options set them."""
        config: dict[str, Any] = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                  "namespace": MANAGER_NAMESPACE}
        if self.options.manage_jobs_without_queue_name:
            config["manageJobsWithoutQueueName"] = True
        if self.options.managed_jobs_namespace_selector is not None:
            config["managedJobsNamespaceSelector"] = dict(self.options.managed_jobs_namespace_selector)
        config["integrations"] = {"frameworks": list(self.options.integrations)}
        store.create("namespaces", None, {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": MANAGER_NAMESPACE}})
        store.create("configmaps", MANAGER_NAMESPACE, {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": MANAGER_CONFIG, "namespace": MANAGER_NAMESPACE},
            "data": {MANAGER_CONFIG_KEY: yaml.safe_dump(config, sort_keys=False)},
        })
