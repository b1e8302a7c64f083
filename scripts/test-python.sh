#!/usr/bin/env bash
# The Python bindings' tests (bindings/python): builds the wheel with
# maturin in a virtual environment this script makes (target/python-venv),
# installs the wheel there, type-checks the stub and runs pytest.
# Run by scripts/test.sh; fails loudly when Python cannot be set up.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/python-venv
wheels=target/python-wheels

install_debian_packages() {
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        return 1
    fi
    echo "test-python: installing $* (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

if ! command -v python3 >/dev/null 2>&1; then
    if ! install_debian_packages python3 python3-venv; then
        echo "test-python: python3 is missing; install Python 3.9 or later (Debian: python3 python3-venv)" >&2
        exit 1
    fi
fi

if [ ! -x "$venv/bin/python" ]; then
    rm -rf "$venv"
    # Debian's python3 makes no virtual environment without python3-venv
    # (ensurepip is split out of it).
    if ! python3 -m venv "$venv"; then
        rm -rf "$venv"
        if ! install_debian_packages python3-venv || ! python3 -m venv "$venv"; then
            echo "test-python: 'python3 -m venv' fails; install the venv module (Debian: python3-venv)" >&2
            exit 1
        fi
    fi
fi

"$venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.9,<2" "pytest>=7" "mypy>=1.8"

rm -rf "$wheels"
"$venv/bin/maturin" build --release --locked -m bindings/python/Cargo.toml --out "$wheels"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheels"/larder-*.whl

# Nothing is left in the source tree: no bytecode, no caches.
export PYTHONDONTWRITEBYTECODE=1
# The stub shipped in the wheel, as a user's type checker sees it.
(cd bindings/python/tests && "../../../$venv/bin/mypy" --strict --cache-dir=/dev/null check_types.py)
# From the tests' directory, so `import larder` is the installed wheel.
(cd bindings/python/tests && "../../../$venv/bin/python" -m pytest -p no:cacheprovider -q .)
