#!/usr/bin/env bash
# The compatibility lane (`make test-compat`, run by `make test`): for each supported Airflow release, a
# venv where the provider's wheel is installed as a user installs it, with that release's constraints
# (requirements/compat/airflow-X.Y.Z.txt: the pins that matter to the provider, every other package as it
# was on the release's day), and there the tests whose outcome depends on the release: the unit tests,
# the trigger tests, a real `airflow triggerer` (a kill while deferred deletes the job, a restart does
# not), and real `airflow dags test` runs (a sync and a deferred TFJob, a retry that reattaches). One line per release at the end, and a non-zero exit if any
# release failed.
#
#   scripts/compat.sh                 every release in requirements/compat/
#   scripts/compat.sh 3.0.6 3.2.2     those only
#   COMPAT_WORKERS=2 (pytest-xdist workers per release; 0 runs serially)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
WORKERS="${COMPAT_WORKERS:-2}"
OUT="$ROOT/build/compat"
UV="$("$ROOT/scripts/venv.sh" uv)"
# The test tools, at the development lock's versions where the release's own pins allow (below).
TEST_TOOLS=(pytest pytest-asyncio pytest-timeout pytest-xdist psutil)

die() { echo "compat.sh: $*" >&2; exit 1; }

releases=("$@")
if ((${#releases[@]} == 0)); then
    for file in "$ROOT"/requirements/compat/airflow-*.txt; do
        name="${file##*/airflow-}"; releases+=("${name%.txt}")
    done
fi

mkdir -p "$OUT/dist"
started=$SECONDS
# One wheel for every release, built as a release is (isolated, the declared backend).
rm -f "$OUT"/dist/*.whl
"$UV" build --quiet --wheel --out-dir "$OUT/dist" "$ROOT" || die "could not build the wheel"
wheel=$(ls "$OUT"/dist/*.whl)
echo "==> compat: built ${wheel##*/} in $((SECONDS - started)) s" >&2

summary=()
failed=0
for release in "${releases[@]}"; do
    pins="$ROOT/requirements/compat/airflow-$release.txt"
    [[ -f "$pins" ]] || die "no $pins"
    day=$(sed -n 's/^# exclude-newer: *//p' "$pins")
    [[ -n "$day" ]] || die "$pins names no '# exclude-newer:' day"
    venv="$OUT/airflow-$release"
    stamp="$venv/.compat-stamp"
    want=$(cat "$pins" "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)
    begun=$SECONDS
    if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
        rm -rf "$venv"
        "$UV" venv --quiet --python "$PYTHON" "$venv"
        # As a user with the release's constraints: Airflow and the wheel (with the extras a DAG of the
        # lane uses), every version as the constraints file has it.
        "$UV" pip install --quiet --python "$venv/bin/python" --exclude-newer "$day" -c "$pins" \
            "apache-airflow==$release" "${wheel}[openlineage]" ||
            die "Airflow $release: the wheel does not install under its constraints ($pins)"
        # The test tools on top, changing nothing the release pinned.
        "$UV" pip freeze --python "$venv/bin/python" | grep -v '^airflow-provider-tfjob' >"$venv/.frozen.txt"
        "$UV" pip install --quiet --python "$venv/bin/python" -c "$venv/.frozen.txt" "${TEST_TOOLS[@]}" ||
            die "Airflow $release: the test tools do not install beside its pins"
        echo "$want" >"$stamp"
    else
        # The same release and requirements: only this checkout's wheel is new.
        "$UV" pip install --quiet --python "$venv/bin/python" --no-deps --reinstall "$wheel"
    fi
    installed=$((SECONDS - begun))
    log="$OUT/airflow-$release.log"
    begun=$SECONDS
    set +e
    (
        cd "$ROOT"
        # The venv's airflow and tfjob-local, and the replicas' python, are the release's.
        PATH="$venv/bin:$PATH" TFJOB_COMPAT_RELEASE="$release" "$venv/bin/python" -m pytest -q \
            -p no:cacheprovider -n "$WORKERS" --dist loadfile -m "not tooling" \
            tests/unit tests/integration/test_trigger.py tests/integration/test_deferred_kill.py \
            tests/integration/test_triggerer_process.py tests/dags/test_dag_runs.py
    ) >"$log" 2>&1
    status=$?
    set -e
    result=$(grep -E '^(=+ )?[0-9]+ (passed|failed)|^=+ .*(passed|failed|error).* in ' "$log" | tail -1 | tr -d '=' | sed 's/^ *//;s/ *$//')
    line="Airflow $release: ${result:-no result} (install ${installed} s, tests $((SECONDS - begun)) s)"
    summary+=("$line")
    if ((status != 0)); then
        failed=1
        echo "==> compat: Airflow $release FAILED; the end of $log:" >&2
        tail -40 "$log" >&2
    fi
    echo "==> compat: $line" >&2
done

echo "== compatibility lane (${#releases[@]} releases, $((SECONDS - started)) s)"
printf '%s\n' "${summary[@]}"
((failed == 0)) || die "the compatibility lane failed (logs: $OUT/airflow-*.log)"
