#!/usr/bin/python3
# screenshot.py TEXT PNG: a terminal screen captured as text (tmux
# capture-pane, 80x25) drawn as a PNG in a mono font, light on dark, as a
# console shows it: the live menu's screens for the test logs and README.
import sys

from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
COLS, ROWS = 80, 25


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")[:ROWS]
    font = ImageFont.truetype(FONT, 16)
    left, top, right, bottom = font.getbbox("M")
    cw, ch = right - left + 1, 20
    img = Image.new("RGB", (COLS * cw + 16, ROWS * ch + 16), (0, 0, 64))
    draw = ImageDraw.Draw(img)
    for y, line in enumerate(lines):
        draw.text((8, 8 + y * ch), line[:COLS], font=font, fill=(220, 220, 220))
    img.save(dst)


if __name__ == "__main__":
    main()
