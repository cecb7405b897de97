# Private networks for the multicast tests: network namespaces joined by a
# bridge, as a switch joins machines.  Sourced after common.sh; everything
# made here is deleted at exit.
#
# netns_bridge NS CIDR: the namespace NS with a bridge br0 at CIDR, its
#   broadcast address set (udpcast finds its peers by broadcast) and a
#   default route through it (multicast is routed by it).
# netns_veth NS PEER NAME CIDR: the namespace PEER on a veth of NS's
#   bridge (NAME in NS, NAMEr in PEER, at most 14 characters), at CIDR.
netns_bridge() {
	ip netns add "$1" || fail "ip netns add $1"
	on_exit "ip netns del $1"
	ip -n "$1" link set lo up
	ip -n "$1" link add br0 type bridge || fail "no bridge in $1"
	ip -n "$1" addr add "$2" brd + dev br0
	ip -n "$1" link set br0 up
	ip -n "$1" route add default dev br0
}
netns_veth() {
	ip netns add "$2" || fail "ip netns add $2"
	on_exit "ip netns del $2"
	ip link add "$3" type veth peer name "$3r" || fail "veth $3"
	ip link set "$3" netns "$1"
	ip link set "$3r" netns "$2"
	ip -n "$1" link set "$3" master br0
	ip -n "$1" link set "$3" up
	ip -n "$2" link set lo up
	ip -n "$2" addr add "$4" brd + dev "$3r"
	ip -n "$2" link set "$3r" up
	ip -n "$2" route add default dev "$3r"
}
