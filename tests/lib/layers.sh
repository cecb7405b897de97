#!/bin/sh
# The layer rule, checked on the built libraries (make layers; the
# setup/layers test): a layer refers to no symbol of a library it may not
# use.  Usage: tests/lib/layers.sh BUILD_DIR
#   engine   no libguestfs, hivex, libvirt or nbdkit (imager serve's plugin
#            links the engine, never the reverse), and nothing defined by
#            the convert, virt or CLI layers (libxml2 it may use: the OVF
#            descriptors of virtual machines as sources)
#   convert  no libvirt, and nothing defined by the virt or CLI layers
#   virt     nothing defined by the CLI (its objects, BUILD_DIR/obj/imager/cli)
# and the plugin contract (include/imager/fsplugin.h): each plugin object
# (BUILD_DIR/obj/fsplugins/*.o but the registry) defines no global symbol
# but its descriptor, const data named fs_plugin_NAME (raw.o holds two:
# raw and its named twin crypt); what a plugin needs beyond fs_* services
# lives in the engine.
# (The headers of a higher layer refuse to be included by a lower one at
# compile time, IMAGER_LAYER; this checks what the linker would see.)
# And the engine's rooms (imager/engine/README.md), in their order
#   core < vm < io < disk < fs < image < sources < jobs:
# a file of a room (imager/engine/ROOM/*.[ch], and the public headers of
# include/imager that the room implements, listed below) includes only
# headers of its own room and of the rooms below it; an include/imager
# header an engine file includes must be in the list.
# Usage: tests/lib/layers.sh BUILD_DIR [SOURCE_ROOT] (default: this tree).
# Prints each offending symbol or include; exits 1 when there is one.
set -u
b=${1:-build}
src=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
for l in engine convert virt; do
	[ -f "$b/libimager-$l.a" ] || { echo "layers: $b/libimager-$l.a is not built" >&2; exit 2; }
done
defined() { nm -g --defined-only "$b/libimager-$1.a" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u; }
undefined() { nm -g --undefined-only "$b/libimager-$1.a" 2>/dev/null | awk '{ print $NF }' | sort -u; }
bad=0
check() { # LAYER DESCRIPTION PATTERN ("": none) [LAYER-WHOSE-SYMBOLS-ARE-FORBIDDEN...]
	layer=$1 what=$2 pat=$3
	shift 3
	found=
	[ -z "$pat" ] || found=$(undefined "$layer" | grep -E "$pat" || true)
	for upper in "$@"; do
		found="$found
$(undefined "$layer" | grep -Fx -f "$tmp/$upper.def" || true)"
	done
	found=$(printf '%s\n' "$found" | grep . | sort -u || true)
	if [ -n "$found" ]; then
		echo "layers: the $layer layer uses $what:"
		printf '%s\n' "$found" | sed 's/^/  /'
		bad=1
	else
		echo "layers: $layer uses nothing of $what"
	fi
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for l in convert virt; do defined "$l" >"$tmp/$l.def"; done
nm -g --defined-only "$b"/obj/imager/cli/*.o 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/cli.def"
[ -s "$tmp/cli.def" ] || { echo "layers: $b/obj/imager/cli/*.o are not built" >&2; exit 2; }
check engine "libguestfs, hivex, libvirt, nbdkit or the layers above it" \
	'^(guestfs_|hivex_|vir[A-Z]|nbdkit_)' convert virt cli
check convert "libvirt or the layers above it" '^vir[A-Z]' virt cli
check virt "the CLI" "" cli
plugins() {
	n=0 pbad=0
	for o in "$b"/obj/fsplugins/*.o; do
		[ -f "$o" ] || { echo "layers: $b/obj/fsplugins/*.o are not built" >&2; exit 2; }
		case $o in */registry.o) continue ;; esac
		n=$((n + 1))
		syms=$(nm -g --defined-only "$o" 2>/dev/null | awk 'NF == 3 { print $2, $3 }')
		extra=$(printf '%s\n' "$syms" | awk 'NF == 2 && !($1 ~ /^[DR]$/ && $2 ~ /^fs_plugin_[a-z0-9_]+$/) { print $2 }')
		if [ -n "$extra" ]; then
			echo "layers: the plugin ${o##*/} exports more than its descriptor:"
			printf '%s\n' "$extra" | sed 's/^/  /'
			pbad=1
		elif ! printf '%s\n' "$syms" | grep -q ' fs_plugin_'; then
			echo "layers: the plugin ${o##*/} exports no descriptor (fs_plugin_NAME)"
			pbad=1
		fi
	done
	if [ "$pbad" = 1 ]; then bad=1; else echo "layers: each of the $n plugins exports only its descriptor"; fi
}
plugins

ROOMS="core vm io disk fs image sources jobs fleet"
# Each public header of the engine, by the room that implements it.
room_of_public() {
	case $1 in
	error.h|bytes.h|bitmap.h|pipeline.h) echo core ;;
	vmsource.h) echo vm ;;
	backend.h) echo io ;;
	disk.h|layout.h|ptable.h) echo disk ;;
	fs.h|fsplugin.h|lvmfmt.h|swapfmt.h|ntfsfmt.h|xfsfmt.h|btrfsfmt.h) echo fs ;;
	image.h|imgread.h|imgserve.h) echo image ;;
	clonezilla.h|partclone.h) echo sources ;;
	job.h) echo jobs ;;
	fleet.h) echo fleet ;;
	*) echo "" ;;
	esac
}
rank() { # ROOM: its place in ROOMS, from 1
	i=0
	for r in $ROOMS; do i=$((i + 1)); [ "$r" = "$1" ] && { echo $i; return; }; done
	echo 0
}
rooms() {
	rbad=0 n=0
	for f in "$src"/imager/engine/*/*.[ch] "$src"/include/imager/*.h; do
		[ -f "$f" ] || continue
		case $f in
		"$src"/include/imager/*) room=$(room_of_public "${f##*/}"); [ -n "$room" ] || continue ;;
		*) room=${f%/*}; room=${room##*/} ;;
		esac
		mine=$(rank "$room")
		[ "$mine" != 0 ] || { echo "layers: ${f#"$src"/} is in no room of the engine ($ROOMS)"; rbad=1; continue; }
		n=$((n + 1))
		for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
			case $inc in
			imager/*)
				theirs=$(room_of_public "${inc#imager/}")
				if [ -z "$theirs" ]; then
					case $f in "$src"/include/*) continue ;; esac
					echo "layers: ${f#"$src"/} includes $inc, which is in no room (tests/lib/layers.sh lists them)"
					rbad=1
					continue
				fi ;;
			*)
				theirs=
				for d in "$src"/imager/engine/*/; do
					[ -f "$d$inc" ] && { theirs=${d%/}; theirs=${theirs##*/}; }
				done
				[ -n "$theirs" ] || continue ;;
			esac
			if [ "$(rank "$theirs")" -gt "$mine" ]; then
				echo "layers: ${f#"$src"/} (room $room) includes $inc of the room $theirs above it"
				rbad=1
			fi
		done
	done
	if [ "$rbad" = 1 ]; then bad=1; else echo "layers: the $n files of the engine's rooms include nothing of a room above theirs ($(echo $ROOMS | sed 's/ / < /g'))"; fi
}
rooms
exit $bad
