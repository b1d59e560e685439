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

# Arguments: releases (3.0.6), and anything else (an option such as --junitxml=FILE) for pytest.
# --no-build: use the wheel an earlier run built; --build-only: build it and stop (make test builds it
# once for every release).
releases=() PYTEST_ARGS=() BUILD=1
for arg in "$@"; do
    case "$arg" in
        --no-build) BUILD=0 ;;
        --build-only) BUILD=2 ;;
        [0-9]*) releases+=("$arg") ;;
        *) PYTEST_ARGS+=("$arg") ;;
    esac
done
if ((${#releases[@]} == 0)); then
    for file in "$ROOT"/requirements/compat/airflow-*.txt; do
        name="${file##*/airflow-}"; releases+=("${name%.txt}")
    done
fi

mkdir -p "$OUT/dist"
started=$SECONDS
# One wheel for every release, built as a release is (isolated, the declared backend).
if ((BUILD)); then
    rm -f "$OUT"/dist/*.whl
    "$UV" build --quiet --wheel --out-dir "$OUT/dist" "$ROOT" || die "could not build the wheel"
    echo "==> compat: built the wheel in $((SECONDS - started)) s" >&2
fi
wheel=$(ls "$OUT"/dist/*.whl 2>/dev/null) || die "no wheel in $OUT/dist: run without --no-build"
((BUILD != 2)) || exit 0

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
    tests=(tests/unit tests/integration/test_trigger.py tests/integration/test_deferred_kill.py
        tests/dags/test_dag_runs.py)
    # A real `airflow triggerer` (its kill test) from 3.2 on: 3.0's and 3.1's triggerer channel lets a send from a
    # thread (the task SDK's blocking calls, as the cncf.kubernetes hook's connection read makes them)
    # read another's answer, and the trigger runner dies (apache/airflow#64620, fixed in 3.2). A kill
    # while deferred on those releases is shown at the trigger's level (test_trigger.py, "before 3.3").
    if [[ "$(printf '%s\n3.2\n' "$release" | sort -V | head -1)" == 3.2 ]]; then
        tests+=(tests/integration/test_triggerer_process.py::test_apache_airflow_36090_62398_job_completes_while_deferred_and_kill_deletes)
    fi
    log="$OUT/airflow-$release.log"
    begun=$SECONDS
    set +e
    (
        cd "$ROOT"
        # The venv's airflow and tfjob-local, and the replicas' python, are the release's.
        PATH="$venv/bin:$PATH" TFJOB_COMPAT_RELEASE="$release" "$venv/bin/python" -m pytest -q \
            -p no:cacheprovider -n "$WORKERS" --dist loadfile -m "not tooling" "${tests[@]}" "${PYTEST_ARGS[@]}"
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
