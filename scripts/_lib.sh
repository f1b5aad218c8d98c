# Functions shared by the setup scripts; each sources it from the repository root:
#     cd "$(dirname "$0")/.."
#     source scripts/_lib.sh
# Messages start with the sourcing script's name: "[setup_vllm 12:00:00] ...".

SETUP_NAME=$(basename "$0" .sh)

step() { echo "[$SETUP_NAME $(date +%H:%M:%S)] $*"; }

need_python() {  # need_python PYTHON: stop unless scripts/setup_core.sh has made that interpreter
    if [ ! -x "$1" ]; then
        echo "$SETUP_NAME: $1 not found; run scripts/setup_core.sh first" >&2
        exit 1
    fi
}

make_venv() {  # make_venv DIR: create the virtual environment DIR unless it is there
    if [ ! -x "$1/bin/python" ]; then
        step "creating $1"
        python3 -m venv "$1"
    fi
}

installed() {  # installed PYTHON DIST VERSION: true when that exact version is installed there
    [ "$("$1" -c "import importlib.metadata as m; print(m.version('$2'))" 2>/dev/null)" = "$3" ]
}

imports() {  # imports PYTHON CODE: true when CODE runs there without an error (its output is dropped)
    "$1" -c "$2" >/dev/null 2>&1
}

# pip's options for every install here: no version nag, no warning about running as root (CI does)
PIP_QUIET_OPTIONS=(--disable-pip-version-check --root-user-action=ignore)

pip_noise() {  # a filter for pip's stderr: drops the warnings that say nothing about this install
    # this machine's pip config lists local indexes that hold only some packages; pip warns per miss
    grep -v -e "is ignored: it is neither" -e "^WARNING: Running pip as the 'root' user" >&2 || true
}

pip_in() {  # pip_in PYTHON ARGS...: a quiet pip install into that interpreter's environment
    local py=$1
    shift
    # setuptools warns on every editable install that a folder named like the package may shadow
    # it (a warning passed on through pip even with --quiet): here that folder is the package itself
    PYTHONWARNINGS="ignore:Editable installation${PYTHONWARNINGS:+,$PYTHONWARNINGS}" \
        "$py" -m pip install --quiet "${PIP_QUIET_OPTIONS[@]}" "$@" 2> >(pip_noise)
}

pip_uninstall_quietly() {  # pip_uninstall_quietly PYTHON DIST: remove DIST from there if it is installed
    if "$1" -c "import importlib.metadata as m; m.version('$2')" >/dev/null 2>&1; then
        "$1" -m pip uninstall --quiet --yes "${PIP_QUIET_OPTIONS[@]}" "$2" 2> >(pip_noise)
    fi
}

elapsed() {  # elapsed START_SECONDS: the time since $SECONDS was START_SECONDS, as 3m07s
    local s=$((SECONDS - $1))
    printf '%dm%02ds' $((s / 60)) $((s % 60))
}

build_in() {  # build_in PYTHON LABEL LOG ARGS...: pip install that compiles, showing its progress
    # pip -v's full output goes to LOG; the console gets one line per tenth of the compile, read
    # from the build tool's own counters: ninja's "[12/140]" and make's "[ 12%]"
    local py=$1 label=$2 log=$3 start=$SECONDS shown=0 percent line
    shift 3
    mkdir -p "$(dirname "$log")"
    : >"$log"  # there before tail follows it
    set +e
    "$py" -m pip install -v "${PIP_QUIET_OPTIONS[@]}" "$@" >"$log" 2>&1 &
    local pid=$!
    while IFS= read -r line; do
        if [[ $line =~ ^[[:space:]]*\[([0-9]+)/([0-9]+)\] ]]; then
            percent=$((100 * BASH_REMATCH[1] / BASH_REMATCH[2]))
        elif [[ $line =~ ^[[:space:]]*\[[[:space:]]*([0-9]+)%\] ]]; then
            percent=${BASH_REMATCH[1]}
        else
            continue
        fi
        if ((percent >= shown + 10)); then
            shown=$((percent / 10 * 10))
            step "  $label: compiled ${shown}% ($(elapsed "$start"))"
        fi
    done < <(tail -n +1 --pid=$pid -f "$log")
    wait $pid
    local status=$?
    set -e
    if [ $status -ne 0 ]; then
        grep -v -e "is ignored: it is neither" "$log" | tail -n 30 >&2
        echo "$SETUP_NAME: building $label failed (exit $status); its full log: $log" >&2
        exit $status
    fi
}
