# imager: see README.md.  `make` builds build/imager; `make check` runs every
# test; `make demo` runs the main job on a built-in sample; `make bench`
# measures against partclone + zstd.
VERSION   := 0.1.0
PREFIX    ?= /usr/local
DESTDIR   ?=
BUILD     ?= build
PKGS      := libparted blkid libzstd json-c libxxhash zlib libnbd libguestfs libvirt libxml-2.0 hivex libarchive liblzma libcrypto

# Debian packages.  `make deps` installs the missing ones (idempotent; a
# no-op when all are present); tests/ts/setup/packages checks that every
# program the product, the tests and the benches run comes from one of these
# lists (or from what a bare Debian 12 has).
#   DEB_BUILD  to build imager (clang and its runtimes: the fuzzing harnesses;
#              nbdkit-plugin-dev: nbdkit-plugin.h, for imager serve's plugin)
#   DEB_RUN    what imager runs on the host: e2fsck/resize2fs, ntfsresize,
#              xfs_growfs and btrfs (growing on partition devices; with
#              resize.f2fs, shrinking with --shrink), nbdkit (imager
#              serve runs it with imager's plugin), and
#              libguestfs's appliance, which supermin builds from this
#              machine's kernel (a bare Debian has none: linux-image-amd64)
#              and qemu runs (libguestfs-xfs: XFS tools inside it, to grow XFS)
#   DEB_TEST   what the tests and the demo run
#   DEB_PKG    to build and check the Debian package (make deb)
#   DEB_BENCH  the anchors make bench compares against
#   DEB_BOOT   what `make boot` copies into the live medium or builds it
#              with (busybox, GRUB for BIOS and UEFI, shim and MokManager
#              signed, xorriso, ssh, sshfs, nbdkit, dialog, kbd and console-data for the keyboard layouts,
#              udpcast for multicast restores; the kernel is DEB_RUN's)
DEB_BUILD := build-essential pkg-config clang libclang-rt-14-dev libparted-dev libblkid-dev libzstd-dev \
             libjson-c-dev libxxhash-dev zlib1g-dev libnbd-dev libguestfs-dev \
             libvirt-dev libxml2-dev libhivex-dev libarchive-dev liblzma-dev libssl-dev \
             nbdkit-plugin-dev
DEB_RUN   := e2fsprogs supermin qemu-system-x86 linux-image-amd64 libguestfs-xfs \
             ntfs-3g xfsprogs btrfs-progs f2fs-tools dosfstools mtools nbdkit udpcast
DEB_TEST  := parted fdisk dosfstools mtools zstd util-linux util-linux-extra time procps file git \
             partclone qemu-utils xxd jq python3 nbdkit libguestfs-tools xxhash \
             cpio mmdebstrap initramfs-tools-core xz-utils lz4 bzip2 \
             libvirt-daemon libvirt-daemon-driver-qemu libvirt-daemon-system \
             libvirt-clients libxml2-utils ovmf libwin-hivex-perl ntfs-3g \
             genisoimage virt-v2v xfsprogs btrfs-progs f2fs-tools exfatprogs \
             exfat-fuse lvm2 cryptsetup-bin gddrescue
DEB_PKG   := debhelper dpkg-dev lintian
# (virt-v2v copies with nbdcopy, from libnbd-bin, which Debian 12's virt-v2v
# package does not depend on: without it every copy fails)
DEB_BENCH := virt-v2v libnbd-bin
DEB_BOOT  := busybox-static kmod cpio zstd mtools dosfstools xorriso grub-pc-bin \
             grub-efi-amd64-bin grub-efi-amd64-signed shim-signed \
             shim-helpers-amd64-signed openssh-client sshfs nbdkit dialog kbd console-data udpcast \
             linux-image-amd64
# (the live medium's tests also start servers: an sshd, Samba's smbd, NFS-Ganesha)
DEB_TEST  += openssh-server samba nfs-ganesha nfs-ganesha-vfs
# (Clonezilla's ocs-sr makes the authentic images sources/clonezilla reads)
DEB_TEST  += clonezilla gdisk dmidecode pciutils
# (nbdfuse shows an NBD export as a local file: sources/rescue's failing
# disk whose files save --rescue names with debugfs)
DEB_TEST  += libnbd-bin
# (ccache: make check's three builds, cached across clones)
DEB_TEST  += ccache
# (udpcast: imager multicast's udp-sender and the receivers' udp-receiver;
# iproute2: the multicast test's network namespace, bridge and taps)
DEB_TEST  += udpcast iproute2
# (systemd-boot's EFI loader: the test guest that boots through Boot Loader
# Specification entries, tests/guest/debian12-bls.sh)
DEB_TEST  += systemd-boot-efi
# (the live menu's tests type into the medium's serial console through
# tmux, read its screen with capture-pane, and draw the main screens as
# PNG with Pillow and the DejaVu mono font; openssl hashes the password
# their sshd takes)
DEB_TEST  += tmux python3-pil fonts-dejavu-core openssl

CC        ?= gcc
OPT       ?= -O2 -g
WARN      := -Wall -Wextra -Werror
# The layers (doc/design.md "The layers"): each a static library that uses only the
# ones below it.  A layer's sources see the private headers of their own
# folder and of the layers below, are compiled with IMAGER_LAYER set (the
# headers of a higher layer refuse to be included: #error), and with the
# pkg-config flags of their own libraries only; `make layers` (run by the
# setup/layers test) checks each library's undefined symbols, that each
# plugin object exports only its descriptor, and that the engine's rooms
# include nothing of a room above theirs (imager/engine/README.md).
#   1 engine   imager/engine + fsplugins  disks, tables, plugins, backends, jobs
#   2 convert  imager/convert             libguestfs, hivex, virtio-win
#   3 virt     imager/virt                libvirt: domains, pools, volumes
#   4 cli      imager/cli                 the imager command
PKGS_ENGINE  := libparted blkid libzstd json-c libxxhash zlib libnbd libarchive libxml-2.0 libcrypto
PKGS_CONVERT := $(PKGS_ENGINE) libguestfs hivex liblzma
PKGS_VIRT    := $(PKGS_CONVERT) libvirt
BASE_CFLAGS = -std=gnu11 $(OPT) $(WARN) -Iinclude -D_GNU_SOURCE \
              -D_FILE_OFFSET_BITS=64 -DIMAGER_VERSION='"$(VERSION)"' -pthread
LDLIBS    = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -pthread
# (-O1, the level ASan's documentation asks for, after BASE_CFLAGS's -O2:
# the sanitized build compiles in 32 s instead of 46 on two cores, and its
# unit tests run as fast)
SAN_FLAGS := -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# The engine's rooms (imager/engine/README.md): core, disk, io, image, fs,
# sources, jobs; each a folder of sources and private headers.
ENGINE_ROOMS := $(sort $(patsubst %/,%,$(dir $(wildcard imager/engine/*/*.c))))
ENGINE_INC  := $(ENGINE_ROOMS:%=-I%)
ENGINE_SRC  := $(wildcard imager/engine/*/*.c) $(wildcard fsplugins/*.c)
CONVERT_SRC := $(wildcard imager/convert/*.c)
VIRT_SRC    := $(wildcard imager/virt/*.c)
CLI_SRC     := $(wildcard imager/cli/*.c)
UNIT_SRC    := $(wildcard tests/unit/test-*.c)
BOOT_SRC    := boot/params.c
HEADERS     := $(wildcard include/imager/*.h) $(wildcard imager/*/*.h) $(wildcard imager/engine/*/*.h)
LAYERS      := engine convert virt

ENGINE_OBJ  := $(ENGINE_SRC:%.c=$(BUILD)/obj/%.o)
CONVERT_OBJ := $(CONVERT_SRC:%.c=$(BUILD)/obj/%.o)
VIRT_OBJ    := $(VIRT_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ     := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
UNITS       := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/unit/%)
SAN_UNITS   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/unit-san/%)
# Libraries in link order, highest layer first.
LIBS        := $(BUILD)/libimager-virt.a $(BUILD)/libimager-convert.a $(BUILD)/libimager-engine.a
SAN_LIBS    := $(LIBS:%.a=%-san.a)

layer_flags = $(shell pkg-config --cflags $(2) 2>/dev/null) -DIMAGER_LAYER=$(1) $(3)
# (-fPIC: the engine is linked into imager serve's nbdkit plugin as well)
ENGINE_FLAGS  = $(call layer_flags,1,$(PKGS_ENGINE),$(ENGINE_INC) -fPIC)
CONVERT_FLAGS = $(call layer_flags,2,$(PKGS_CONVERT),-Iimager/convert $(ENGINE_INC))
VIRT_FLAGS    = $(call layer_flags,3,$(PKGS_VIRT),-Iimager/virt -Iimager/convert $(ENGINE_INC))
CLI_FLAGS     = $(call layer_flags,4,$(PKGS),-Iimager/cli -Iimager/virt -Iimager/convert $(ENGINE_INC))
# Unit tests look inside every layer.
UNIT_FLAGS    = $(shell pkg-config --cflags $(PKGS) 2>/dev/null) -Itests/unit $(ENGINE_INC) -Iimager/convert -Iimager/virt

# Fuzzing (tests/fuzz, doc/tests.md "Fuzzing"): each harness a libFuzzer binary,
# built by clang with the engine (and convert's text editors) compiled again
# with the fuzzer's coverage and ASan/UBSan.  `make fuzz` runs each for
# FUZZ_SECONDS (default 60) from its seed corpus; `make check` runs each
# for a few seconds (tests/ts/fuzz/smoke).
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz-*.c)
FUZZERS      := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_FLAGS   := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_OBJ     := $(ENGINE_SRC:%.c=$(BUILD)/fz/%.o) $(BUILD)/fz/imager/convert/convtext.o \
                $(BUILD)/fz/imager/convert/initrd.o
FUZZ_BASE     = $(BASE_CFLAGS)

.PHONY: all deps check unit unit-san suites demo bench boot install deb layers clean fuzz
all: $(BUILD)/imager $(BUILD)/imager-live $(BUILD)/nbdkit-imager-plugin.so

$(BUILD)/obj/imager/engine/%.o $(BUILD)/san/imager/engine/%.o $(BUILD)/obj/fsplugins/%.o $(BUILD)/san/fsplugins/%.o: LAYER_FLAGS = $(ENGINE_FLAGS)
$(BUILD)/obj/imager/convert/%.o $(BUILD)/san/imager/convert/%.o: LAYER_FLAGS = $(CONVERT_FLAGS)
$(BUILD)/obj/imager/virt/%.o $(BUILD)/san/imager/virt/%.o: LAYER_FLAGS = $(VIRT_FLAGS)
$(BUILD)/obj/imager/cli/%.o: LAYER_FLAGS = $(CLI_FLAGS)
$(BUILD)/fz/imager/engine/%.o $(BUILD)/fz/fsplugins/%.o: LAYER_FLAGS = $(ENGINE_FLAGS)
$(BUILD)/fz/imager/convert/%.o: LAYER_FLAGS = $(CONVERT_FLAGS)

$(BUILD)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(LAYER_FLAGS) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<
$(BUILD)/san/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(LAYER_FLAGS) $(SAN_FLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/fz/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_BASE) $(LAYER_FLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<
# (the harnesses and unit tests compile and link in two steps: ccache,
# which make check uses when it is there, caches compiles, never links)
$(BUILD)/fuzz/%.o: tests/fuzz/%.c tests/fuzz/fuzz.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_BASE) $(UNIT_FLAGS) -Itests/fuzz $(FUZZ_FLAGS) -fsanitize=fuzzer -c -o $@ $<
$(BUILD)/fuzz/%: $(BUILD)/fuzz/%.o $(BUILD)/libimager-fuzz.a
	$(FUZZ_CC) $(FUZZ_BASE) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $< \
		$(BUILD)/libimager-fuzz.a $(LDLIBS)
$(BUILD)/libimager-fuzz.a: $(FUZZ_OBJ)

$(BUILD)/libimager-engine.a: $(ENGINE_OBJ)
$(BUILD)/libimager-convert.a: $(CONVERT_OBJ)
$(BUILD)/libimager-virt.a: $(VIRT_OBJ)
$(BUILD)/libimager-boot.a: $(BOOT_SRC:%.c=$(BUILD)/obj/%.o)
$(BUILD)/libimager-boot-san.a: $(BOOT_SRC:%.c=$(BUILD)/san/%.o)
$(BUILD)/libimager-engine-san.a: $(ENGINE_SRC:%.c=$(BUILD)/san/%.o)
$(BUILD)/libimager-convert-san.a: $(CONVERT_SRC:%.c=$(BUILD)/san/%.o)
$(BUILD)/libimager-virt-san.a: $(VIRT_SRC:%.c=$(BUILD)/san/%.o)
$(BUILD)/libimager-%.a:
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/imager: $(CLI_OBJ) $(LIBS)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -o $@ $(CLI_OBJ) $(LIBS) $(LDLIBS) $(LDFLAGS)

# imager serve's nbdkit plugin (imager/nbdkit/): a shared object that links
# the engine library (built -fPIC; only what the image reader needs is
# pulled in, and the engine links nothing of nbdkit), exporting nbdkit's
# entry point alone (the version script); nbdkit_* come from nbdkit itself.
$(BUILD)/obj/imager/nbdkit/%.o: LAYER_FLAGS = $(call layer_flags,1,$(PKGS_ENGINE),) -fPIC
$(BUILD)/nbdkit-imager-plugin.so: $(BUILD)/obj/imager/nbdkit/nbdkit-imager-plugin.o \
		$(BUILD)/libimager-engine.a imager/nbdkit/plugin.map
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -shared -Wl,--version-script=imager/nbdkit/plugin.map \
		-o $@ $< $(BUILD)/libimager-engine.a \
		$(shell pkg-config --libs $(PKGS_ENGINE) 2>/dev/null) -pthread $(LDFLAGS)

# The live medium's parameter checker: boot/params.c (no library but libc).
$(BUILD)/imager-live: boot/imager-live.c $(BUILD)/libimager-boot.a
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -o $@ $^ $(LDFLAGS)

$(BUILD)/unit/%.o: tests/unit/%.c $(wildcard tests/unit/*.h) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(UNIT_FLAGS) $(CFLAGS) -c -o $@ $<
$(BUILD)/unit/%: $(BUILD)/unit/%.o $(LIBS) $(BUILD)/libimager-boot.a
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -o $@ $< $(LIBS) $(BUILD)/libimager-boot.a $(LDLIBS)
$(BUILD)/unit-san/%.o: tests/unit/%.c $(wildcard tests/unit/*.h) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(UNIT_FLAGS) $(SAN_FLAGS) $(CFLAGS) -c -o $@ $<
$(BUILD)/unit-san/%: $(BUILD)/unit-san/%.o $(SAN_LIBS) $(BUILD)/libimager-boot-san.a
	$(CC) $(BASE_CFLAGS) $(SAN_FLAGS) $(CFLAGS) -o $@ $< $(SAN_LIBS) $(BUILD)/libimager-boot-san.a $(LDLIBS)
.SECONDARY: $(UNITS:%=%.o) $(SAN_UNITS:%=%.o) $(FUZZERS:%=%.o)

# The layer rule, from the built libraries: no layer refers to a symbol of
# a library it may not use (engine: no libguestfs, hivex or libvirt;
# convert: no libvirt, nothing of virt).
layers: $(LIBS) $(BUILD)/imager
	@sh tests/lib/layers.sh $(BUILD)

deps:
	@sh tests/lib/deps.sh $(DEB_BUILD) $(DEB_RUN) $(DEB_TEST) $(DEB_PKG) $(DEB_BOOT)

# The live medium (README "Live media"): build/boot/{vmlinuz,initrd.img,
# imager-live.iso,pxe/}, offline.  APPEND="PARAMS" adds kernel parameters to
# every entry; SSH_KEY=FILE bakes a private key in.
boot: all
	@sh tests/lib/deps.sh $(DEB_BOOT)
	@bash boot/build.sh $(if $(APPEND),--append '$(APPEND)') $(if $(SSH_KEY),--ssh-key '$(SSH_KEY)') \
		$(BUILD)/imager $(BUILD)/imager-live $(BUILD)/boot

unit: $(UNITS)
	@sh tests/lib/run-units.sh $(UNITS)
# intercept_strchr=0: libparted 3.5 (Debian 12) reads past a buffer with
# strchr in its own library constructor (ped_disk_gpt_init), before any of
# our code runs; everything else is checked.
SAN_ENV := ASAN_OPTIONS=detect_leaks=1:intercept_strchr=0 UBSAN_OPTIONS=print_stacktrace=1
unit-san: $(SAN_UNITS)
	@$(SAN_ENV) sh tests/lib/run-units.sh $(SAN_UNITS)

fuzz: deps
	@$(MAKE) --no-print-directory $(FUZZERS)
	@sh tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZERS)

# The suites drive the built binary against disks made by the real tools.
suites: $(BUILD)/imager $(BUILD)/nbdkit-imager-plugin.so
	@IMAGER=$(abspath $(BUILD)/imager) bash tests/run $(TESTS)

# Everything, with one closing "N passed, N failed, N skipped" line.
# TESTS=... selects (the fixtures they need come along); REPEAT=N runs each
# selected test N times in a row (the flaky-test guard: doc/tests.md "Flaky tests").
# The build goes through ccache (DEB_TEST) when it is there: a fresh clone
# of a tree this machine built before compiles its three builds (plain,
# sanitized, fuzzing) in about 20 s instead of 100 on two cores.
# CCACHE_NOHASHDIR: clones in other folders share the cache (the debug
# information of a cached object then names the folder it was first built
# in; sanitizer reports name files relative to the tree, as before).
CHECK_CC = $(if $(shell command -v ccache),CCACHE_NOHASHDIR=1 CC="ccache $(CC)" FUZZ_CC="ccache $(FUZZ_CC)")
check: deps
	@$(CHECK_CC) $(MAKE) --no-print-directory -j$$(nproc) all $(UNITS) $(SAN_UNITS) $(FUZZERS)
	@$(SAN_ENV) IMAGER=$(abspath $(BUILD)/imager) UNITS="$(UNITS) $(SAN_UNITS)" \
		FUZZERS="$(abspath $(FUZZERS))" $(if $(REPEAT),REPEAT=$(REPEAT)) bash tests/run $(TESTS)

demo: deps
	@$(MAKE) --no-print-directory all
	@IMAGER=$(abspath $(BUILD)/imager) bash tests/demo.sh

bench: deps
	@sh tests/lib/deps.sh $(DEB_BENCH)
	@$(MAKE) --no-print-directory all
	@IMAGER=$(abspath $(BUILD)/imager) bash tests/bench/bench.sh

install: $(BUILD)/imager $(BUILD)/nbdkit-imager-plugin.so
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/lib/imager
	install -m 755 $(BUILD)/imager $(DESTDIR)$(PREFIX)/bin/imager
	install -m 644 $(BUILD)/nbdkit-imager-plugin.so $(DESTDIR)$(PREFIX)/lib/imager/nbdkit-imager-plugin.so
	install -m 644 imager.1 $(DESTDIR)$(PREFIX)/share/man/man1/imager.1

# The Debian package, built by dpkg-buildpackage (debian/) from a copy of
# this tree, checked by lintian: $(BUILD)/imager_$(VERSION)_ARCH.deb.
deb:
	@sh tests/lib/deps.sh $(DEB_BUILD) $(DEB_PKG)
	@rm -rf $(BUILD)/deb && mkdir -p $(BUILD)/deb/imager-$(VERSION)
	@tar -c --exclude=./build --exclude=./.git . | tar -x -C $(BUILD)/deb/imager-$(VERSION)
	@# (a clean make inside: this make's variables, BUILD among them, stay out)
	cd $(BUILD)/deb/imager-$(VERSION) && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BUILD dpkg-buildpackage -b -us -uc -Jauto
	lintian --fail-on error $(BUILD)/deb/imager_$(VERSION)_*.changes
	cp $(BUILD)/deb/imager_$(VERSION)_*.deb $(BUILD)/

clean:
	rm -rf $(BUILD)
