#!/usr/bin/env bash
# What a new user does with the README: a fresh cargo project outside the
# workspace, one dependency on crates/larder by path, the README's Rust
# examples as its programs, run. The workspace's Cargo.lock is copied in so
# the project builds the versions the workspace tests.
set -euo pipefail
cd "$(dirname "$0")/.."
workspace=$(pwd)

project=$(mktemp -d)
trap 'rm -rf "$project"' EXIT
cargo init --quiet --vcs none --name readme-user "$project"
cat >>"$project/Cargo.toml" <<TOML
larder = { path = "$workspace/crates/larder" }
TOML
cp Cargo.lock "$project/Cargo.lock"

# Each \`\`\`rust block of the README becomes one program.
mkdir -p "$project/examples"
awk -v dir="$project/examples" '
    /^```rust$/ { n++; file = dir "/readme_" n ".rs"; inside = 1; next }
    /^```$/ && inside { inside = 0; close(file); next }
    inside { print > file }
' README.md
count=$(ls "$project/examples" | wc -l)
if [ "$count" -lt 2 ]; then
    echo "readme-new-project: found $count Rust examples in README.md, expected the KV and the file system one" >&2
    exit 1
fi
for example in "$project"/examples/*.rs; do
    name=$(basename "$example" .rs)
    echo "readme-new-project: cargo run --example $name in a new project"
    cargo run --quiet --manifest-path "$project/Cargo.toml" --example "$name"
done
echo "readme-new-project: the README examples built and ran in a new cargo project"
echo "readme: $count passed, 0 failed"
