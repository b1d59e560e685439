"""The operator's templating hooks: only the job parameter (``tfjob``, or ``job``) may name a template file.

Airflow treats every templated string ending in a template_ext suffix as a file name, list items
included, so ``args=["--config=conf.yaml"]`` would be looked up as a template file. Only the job
parameter (``tfjob``; ``job`` on the generic operator) may name a file here, and only as the DAG
author wrote it (:mod:`airflow_tfjob.build.templates` has the rules, shared with ``manifest.load_manifest``):
a path that templating produced (e.g. from params) is refused unless opted in. Each field is rendered on its own, so that a Jinja error names it.

These override BaseOperator's templating methods, which Airflow calls on the task itself before any
try exists, so they stay a base class the operator inherits first (the one that is not a collaborator
of the try); the work itself is done by :mod:`airflow_tfjob.build.templates`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jinja2

from airflow_tfjob.build import templates
from airflow_tfjob.build.checker import JobValidationError
from airflow_tfjob.build.secrets import hidden
from airflow_tfjob.operators.shared_checks import is_template

if TYPE_CHECKING:
    from pathlib import Path

    import jinja2
    from airflow.sdk import BaseOperator, Context

    _Base = BaseOperator
else:
    _Base = object


class TemplateFileRendering(_Base):
    """Rendering of the operator's fields, with its job parameter as the only one that may name a file."""

    #: The parameter holding the manifest or template: "tfjob" (TFJobOperator) or "job".
    job_field: str = "tfjob"
    allow_template_outside_dag_folder: bool
    allow_template_path_from_params: bool

    @property
    def _job_value(self) -> Any:
        return getattr(self, self.job_field)

    def _mask_secrets(self) -> None:
        """Register secret values with Airflow's masker once they are rendered (the operator's own)."""

    def _secret_strings(self) -> list[Any]:
        """The rendered secret values the operator holds (the operator's own): hidden in its rendered fields."""
        return []

    def _hide_rendered_secrets(self, template_fields: Any) -> None:
        """Show the rendered fields with every secret hidden however deep it sits.

        Airflow stores and displays a task's rendered fields right after rendering, masking the values
        registered with its masker only to a nesting depth of 5 and never in dict keys (3.0 masks them
        in the API server, which never saw the worker's registrations). So every rendered field that
        holds a registered value or one of the operator's own secrets (``secret_env``, a decorator's
        ``secret_args``) anywhere is swapped for a copy with it hidden (:func:`secrets.hidden`), and
        the values as rendered are kept aside until ``_unhide_rendered_secrets`` (the start of
        ``execute`` and ``execute_complete``), which the job needs.
        """
        secrets = self._secret_strings()
        for name in template_fields:
            value = getattr(self, name, None)
            shown = hidden(value, secrets)
            if shown is not value:
                self.__dict__.setdefault("_rendered_with_secrets", {}).setdefault(name, value)
                setattr(self, name, shown)

    def _unhide_rendered_secrets(self) -> None:
        """Put back the rendered values ``_hide_rendered_secrets`` kept aside (the job needs them)."""
        for name, value in self.__dict__.pop("_rendered_with_secrets", {}).items():
            setattr(self, name, value)

    def resolve_template_files(self) -> None:
        # The file is read when the task renders, with the same rules; a path outside the allowed
        # folders fails the DAG's parse here already.
        value = self._job_value
        if templates.looks_like_path(value) and not is_template(value) and self.has_dag():
            try:
                self._template_path(str(value))
            except templates.TemplateNotFoundError:
                pass  # it may be written before the task runs; rendering reports it then
        self.prepare_template()

    def _do_render_template_fields(
        self,
        parent: Any,
        template_fields: Any,
        context: Context,
        jinja_env: jinja2.Environment,
        seen_oids: set[int],
    ) -> None:
        field = self.job_field
        if parent is self and field in template_fields and templates.looks_like_path(self._job_value):
            if not is_template(self._job_value):  # decided on the value as the DAG author wrote it
                setattr(self, field, self._render_template_file(str(self._job_value), context, jinja_env))
                template_fields = [f for f in template_fields if f != field]
        if parent is not self:
            super()._do_render_template_fields(parent, template_fields, context, jinja_env, seen_oids)
            return
        for name in template_fields:  # one by one, so that a Jinja error names its field
            self._render_field(name, context, jinja_env, seen_oids)
        self._mask_secrets()
        if field in template_fields and templates.looks_like_path(self._job_value):
            setattr(self, field, self._rendered_template_path(str(self._job_value), context, jinja_env))
        self._hide_rendered_secrets(template_fields)

    def _rendered_template_path(self, path: str, context: Context, jinja_env: jinja2.Environment) -> Any:
        """A job parameter that names a file only once rendered: its path comes from run-time values."""
        if not self.allow_template_path_from_params:
            raise JobValidationError(
                self.job_field,
                f"rendered to {path[:200]!r}, which looks like a file path; a path that comes from "
                "templating (e.g. params) is not read",
                "write the file's path literally in the DAG, or pass the manifest itself; if run-time "
                "values may choose the file, pass allow_template_path_from_params=True",
            )
        return self._render_template_file(path, context, jinja_env)

    def render_template(
        self,
        content: Any,
        context: Context,
        jinja_env: jinja2.Environment | None = None,
        seen_oids: set[int] | None = None,
    ) -> Any:
        if isinstance(content, str):
            env = jinja_env or self.get_template_env()
            return self._render(env.from_string(content), context)
        return super().render_template(content, context, jinja_env, seen_oids)

    def _render_field(
        self, field: str, context: Context, jinja_env: jinja2.Environment, seen_oids: set[int]
    ) -> None:
        try:
            super()._do_render_template_fields(self, [field], context, jinja_env, seen_oids)
        except jinja2.TemplateError as error:
            raise templates.jinja_error(error, None, field) from None

    def _template_path(self, value: str) -> Path:
        folders = templates.template_folders(self.dag if self.has_dag() else None)
        return templates.resolve_template_path(
            value, folders, allow_outside=self.allow_template_outside_dag_folder
        )

    def _render_template_file(self, path: str, context: Context, jinja_env: jinja2.Environment) -> Any:
        return templates.load_template_file(
            self._template_path(path), jinja_env, lambda template: self._render(template, context)
        )
