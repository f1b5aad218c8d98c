# Helpers shared by the setup scripts; each sources it from the repository root:
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

pip_in() {  # pip_in PYTHON ARGS...: a quiet pip install into that interpreter's environment
    local py=$1
    shift
    # this machine's pip config lists local indexes that hold only some packages; pip warns per miss
    "$py" -m pip install --quiet --disable-pip-version-check "$@" 2> >(grep -v "is ignored: it is neither" >&2)
}
