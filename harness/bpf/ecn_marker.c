// SPDX-License-Identifier: GPL-2.0
/*
 * Interleave ECN marker: a tc clsact-egress program for kernels without sch_red.
 *
 * Each switch egress port keeps a *virtual queue* that drains at the port's
 * HTB rate: on every packet the backlog is reduced by rate * (now - last) and
 * this packet's length is added.  When the backlog exceeds K bytes, an
 * ECN-capable (ECT(0)/ECT(1)) IPv4 or IPv6 packet gets CE; a packet that would
 * overflow the real queue limit is not added (the bfifo below drops it).
 * Because the virtual queue drains at the same rate as the HTB class behind
 * it, its backlog follows the real one (platform notes, "ECN marking without
 * sch_red").
 *
 * Maps (pinned by iproute2 under /sys/fs/bpf/tc/globals/):
 *   interleave_ecn_cfg  ifindex -> {rate_bps, k_bytes, limit_bytes}  written by the harness
 *   interleave_ecn_q    ifindex -> queue state and counters           read by the harness
 * The program never marks on an interface that has no config entry.
 *
 * Priority ports (link.sharing priority: cfg.levels > 0, strict-priority HTB leaves picked by the
 * DSCP's class selector, harness/qdisc.py): a packet of level l (0 most urgent) waits only behind
 * levels 0..l, and their aggregate drains at the port rate whatever the lower levels hold. So the
 * program keeps one virtual queue per aggregate (vq[l] = backlog of levels 0..l) and marks a packet
 * of level l on vq[l]: an urgent flow is not marked for a backlog of less urgent ones. Marks are
 * also counted per level (marked_level).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <stddef.h>

#define LIBBPF_PIN_BY_NAME 1

#define MAX_LEVELS 8

struct ecn_cfg {
	__u64 rate_bps;     /* drain rate, bits per second */
	__u64 k_bytes;      /* marking threshold */
	__u64 limit_bytes;  /* real queue limit (bfifo) */
	__u64 levels;       /* 0: one queue; else priority levels (<= MAX_LEVELS) */
};

struct ecn_q {
	struct bpf_spin_lock lock;
	__u64 backlog;      /* virtual backlog, bytes, as of last_ns */
	__u64 last_ns;
	__u64 pkts;         /* packets seen */
	__u64 bytes;        /* bytes seen */
	__u64 ect_pkts;     /* ECN-capable packets seen */
	__u64 marked;       /* packets set to CE by this program */
	__u64 above_k_not_ect; /* non-ECT packets seen above K (not markable) */
	__u64 overflow;     /* packets that would not fit the real queue */
	__u64 vq[MAX_LEVELS];           /* priority ports: virtual backlog of levels 0..l */
	__u64 marked_level[MAX_LEVELS]; /* priority ports: marks per level */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct ecn_cfg);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} interleave_ecn_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct ecn_q);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} interleave_ecn_q SEC(".maps");

static __always_inline int set_ce_v4(struct __sk_buff *skb, __u32 off)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct iphdr *ip = data + off;
	if ((void *)(ip + 1) > end)
		return 0;
	__u8 tos = ip->tos;
	if ((tos & 3) == 0 || (tos & 3) == 3)
		return 0;
	__u16 old = *(__u16 *)ip;
	__u8 ntos = tos | 3;
	__u16 new = old;
	((__u8 *)&new)[1] = ntos;
	bpf_l3_csum_replace(skb, off + offsetof(struct iphdr, check), old, new, 2);
	bpf_skb_store_bytes(skb, off + offsetof(struct iphdr, tos), &ntos, 1, 0);
	return 1;
}

static __always_inline int set_ce_v6(struct __sk_buff *skb, __u32 off)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	__u8 *p = data + off;
	if ((void *)(p + 2) > end)
		return 0;
	/* traffic class = low 4 bits of byte 0, high 4 bits of byte 1; ECN = its low 2 bits */
	__u8 b1 = p[1];
	__u8 ecn = (b1 >> 4) & 3;
	if (ecn == 0 || ecn == 3)
		return 0;
	b1 |= 3 << 4;
	bpf_skb_store_bytes(skb, off + 1, &b1, 1, 0);
	return 1;
}

static __always_inline int ect_of(struct __sk_buff *skb, __u16 proto, __u32 off)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	__u8 *p = data + off;
	if ((void *)(p + 2) > end)
		return 0;
	if (proto == bpf_htons(ETH_P_IP))
		return (p[1] & 3) == 1 || (p[1] & 3) == 2;
	if (proto == bpf_htons(ETH_P_IPV6))
		return ((p[1] >> 4) & 3) == 1 || ((p[1] >> 4) & 3) == 2;
	return 0;
}

/* The packet's priority level on a port with ``levels`` levels: class selector cs (the DSCP's top
 * 3 bits) in 1..levels-1 is level levels-1-cs; anything else (unmarked, beyond) the least urgent. */
static __always_inline __u32 level_of(struct __sk_buff *skb, __u16 proto, __u32 off, __u64 levels)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	__u8 *p = data + off;
	__u32 cs = 0;
	if ((void *)(p + 2) > end)
		return levels - 1;
	if (proto == bpf_htons(ETH_P_IP))
		cs = p[1] >> 5;
	else if (proto == bpf_htons(ETH_P_IPV6))
		cs = (p[0] & 0x0f) >> 1;
	if (cs >= 1 && cs < levels)
		return levels - 1 - cs;
	return levels - 1;
}

SEC("classifier")
int ecn_mark(struct __sk_buff *skb)
{
	__u32 ifindex = skb->ifindex;
	struct ecn_cfg *cfg = bpf_map_lookup_elem(&interleave_ecn_cfg, &ifindex);
	if (!cfg || cfg->rate_bps == 0)
		return TC_ACT_OK;

	struct ecn_q *q = bpf_map_lookup_elem(&interleave_ecn_q, &ifindex);
	if (!q) {
		struct ecn_q zero = {};
		bpf_map_update_elem(&interleave_ecn_q, &ifindex, &zero, BPF_NOEXIST);
		q = bpf_map_lookup_elem(&interleave_ecn_q, &ifindex);
		if (!q)
			return TC_ACT_OK;
	}

	if (bpf_skb_pull_data(skb, sizeof(struct ethhdr) + sizeof(struct ipv6hdr)) < 0) {
		/* short frame: still account its bytes below */
	}
	__u16 proto = skb->protocol;
	int ect = ect_of(skb, proto, sizeof(struct ethhdr));
	__u64 len = skb->len;
	__u64 now = bpf_ktime_get_ns();
	__u64 rate = cfg->rate_bps, k = cfg->k_bytes, limit = cfg->limit_bytes;
	__u64 levels = cfg->levels > MAX_LEVELS ? MAX_LEVELS : cfg->levels;
	__u32 lvl = levels ? level_of(skb, proto, sizeof(struct ethhdr), levels) : 0;
	lvl &= MAX_LEVELS - 1;
	int mark = 0;

	bpf_spin_lock(&q->lock);
	if (q->last_ns && now > q->last_ns) {
		__u64 drained = (now - q->last_ns) * rate / 8000000000ULL;
		q->backlog = q->backlog > drained ? q->backlog - drained : 0;
#pragma unroll
		for (int j = 0; j < MAX_LEVELS; j++)
			q->vq[j] = q->vq[j] > drained ? q->vq[j] - drained : 0;
	}
	q->last_ns = now;
	q->pkts += 1;
	q->bytes += len;
	if (limit && q->backlog + len > limit) {
		q->overflow += 1;
	} else {
		q->backlog += len;
		__u64 seen = q->backlog;
		if (levels) {
#pragma unroll
			for (int j = 0; j < MAX_LEVELS; j++)
				if (j >= lvl && j < levels)
					q->vq[j] += len;
			seen = q->vq[lvl];
		}
		if (seen > k) {
			if (ect) {
				mark = 1;
				q->marked += 1;
				q->marked_level[lvl] += 1;
			} else {
				q->above_k_not_ect += 1;
			}
		}
	}
	if (ect)
		q->ect_pkts += 1;
	bpf_spin_unlock(&q->lock);

	if (mark) {
		if (proto == bpf_htons(ETH_P_IP))
			set_ce_v4(skb, sizeof(struct ethhdr));
		else if (proto == bpf_htons(ETH_P_IPV6))
			set_ce_v6(skb, sizeof(struct ethhdr));
	}
	return TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
