"""Make the gallery's images: ``docs/_static/gallery/<name>.png`` for every figure of the registry.

    python docs/make_gallery.py                      # every figure at --quick size, stores in ./figures
    python docs/make_gallery.py --out /tmp/figures   # stores elsewhere (an existing store is reused)

Computes every figure at the given size exactly as ``dlnm reproduce --quick --out figures`` does (an existing
figure store of the same size is drawn again without recomputing anything), then writes a reduced copy of each
PNG (at most ``--width`` pixels wide, 256 colours) into ``docs/_static/gallery/``. The docs build uses these files
and runs nothing: computing the figures at ``--tiny`` size during the build would compile every kernel first on a
machine with an empty Numba cache, more than the build's one-minute budget. Needs Pillow (a Matplotlib dependency).
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GALLERY = os.path.join(HERE, "_static", "gallery")


def shrink(src, dst, width):
    """``src`` scaled down to at most ``width`` pixels wide, as a 256-colour PNG at ``dst``."""
    from PIL import Image

    with Image.open(src) as img:
        img = img.convert("RGB")
        if img.width > width:
            img = img.resize((width, round(img.height * width / img.width)), Image.LANCZOS)
        img.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(dst, optimize=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="figures", help="folder of the figure stores (default: figures)")
    parser.add_argument("--size", default="quick", choices=("tiny", "quick", "full"), help="figure size")
    parser.add_argument("--width", type=int, default=1400, help="largest image width in pixels (default 1400)")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.dirname(HERE))
    from dlnmomentum.figures import FIGURES, reproduce

    results = reproduce(args.size, args.out, log=lambda line: print(line, file=sys.stderr, flush=True))
    os.makedirs(GALLERY, exist_ok=True)
    for name in FIGURES:
        _, images, _ = results[name]
        png = next(p for p in images if p.endswith(".png"))
        dst = os.path.join(GALLERY, f"{name}.png")
        shrink(png, dst, args.width)
        print(f"{dst}: {os.path.getsize(dst) / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
