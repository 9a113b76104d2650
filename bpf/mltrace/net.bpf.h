/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after io.bpf.h). Socket calls (send*, recv*): the
 * peer's address from the call's arguments or the socket (on_net, called
 * from leave in syscalls.bpf.h).
 */

EV_KIND(EV_NET, 22);  /* mltrace_log::NetCall */

/* ev_net.h.flags; an enum so that the skeleton carries it to user space */
enum net_bits {
	NETF_PEER_USER = 1,   /* the peer came from the call's own address argument */
	NETF_PEER_SOCK = 2,   /* the peer is the socket's (connected, or bound for unix) */
	NETF_PARTIAL = 4,     /* more messages or iovecs than summed: bytes are a lower bound */
};

#define NET_PATH 108  /* sizeof(sockaddr_un.sun_path) */
#define NET_MMSG 8    /* messages of a sendmmsg/recvmmsg whose lengths are summed */

/* sendto, recvfrom, sendmsg, recvmsg, sendmmsg, recvmmsg on a socket: bytes
 * and the peer (AF_INET, AF_INET6: addr and port; AF_UNIX: path). */
struct ev_net {
	struct ev_hdr h;
	u64 dur;
	u64 file;
	u64 requested;  /* len, or the iovecs' sum (the first message's for mmsg) */
	s64 ret;        /* bytes, or messages for the mmsg calls, or -errno */
	u64 bytes;      /* bytes moved (the mmsg calls: summed over NET_MMSG) */
	s32 fd;
	u16 family;     /* AF_*, 0 when no peer is known */
	u16 port;       /* host order */
	u8 addr[16];    /* IPv4 in the first 4 bytes */
	char path[NET_PATH];
	u32 _pad;
};
struct ev_net keep_net = {};
enum net_bits keep_net_bits = 0;

#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10

/* A sockaddr in user memory (the call's own address argument) into the
 * record; false when it is none of the families we name. */
static __always_inline bool net_user_addr(struct ev_net *e, const void *sa, u32 len)
{
	u16 family = 0;
	u16 port = 0;

	if (!sa || len < 2 || bpf_probe_read_user(&family, sizeof(family), sa))
		return false;
	if (family == AF_INET && len >= 8) {
		bpf_probe_read_user(&port, sizeof(port), sa + 2);
		bpf_probe_read_user(e->addr, 4, sa + 4);
	} else if (family == AF_INET6 && len >= 24) {
		bpf_probe_read_user(&port, sizeof(port), sa + 2);
		bpf_probe_read_user(e->addr, 16, sa + 8);
	} else if (family == AF_UNIX) {
		bpf_probe_read_user_str(e->path, sizeof(e->path), sa + 2);
	} else {
		return false;
	}
	e->family = family;
	e->port = bpf_ntohs(port);
	return true;
}

/* The socket's own idea of its peer: the remote address and port of a
 * connected inet socket, the path a unix socket's peer is bound to (or
 * its own, for a server's accepted socket). */
static __always_inline bool net_sock_addr(struct ev_net *e, struct file *f)
{
	struct socket *sock = BPF_CORE_READ(f, private_data);
	struct sock *sk = BPF_CORE_READ(sock, sk);
	u16 family;

	if (!sk)
		return false;
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family == AF_INET) {
		u32 a = BPF_CORE_READ(sk, __sk_common.skc_daddr);

		if (!a)
			return false;
		__builtin_memcpy(e->addr, &a, 4);
		e->port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	} else if (family == AF_INET6 && bpf_core_field_exists(sk->__sk_common.skc_v6_daddr)) {
		/* (A kernel without IPv6 has no v6 address to relocate against.) */
		bpf_probe_read_kernel(e->addr, 16, &sk->__sk_common.skc_v6_daddr);
		e->port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
		if (!e->port)
			return false;
	} else if (family == AF_UNIX && bpf_core_type_exists(struct unix_sock)) {
		/* (Unix sockets built as a module have no type in vmlinux's BTF.) */
		struct unix_sock *u = (void *)sk;
		struct unix_sock *peer = (void *)BPF_CORE_READ(u, peer);
		struct unix_address *a = peer ? BPF_CORE_READ(peer, addr) : NULL;

		if (!a)
			a = BPF_CORE_READ(u, addr);
		if (!a)
			return false;
		/* name (a sockaddr_un) follows the int len; its path after the family. */
		bpf_probe_read_kernel_str(e->path, sizeof(e->path),
					  (void *)a + bpf_core_field_offset(struct unix_address, len) + 4 + 2);
	} else {
		return false;
	}
	e->family = family;
	return true;
}

static __noinline int on_net(struct inflight *v, s64 ret, u64 now, u64 id)
{
	u32 zero = 0;
	struct heap *hp = bpf_map_lookup_elem(&heap, &zero);
	struct ev_net *e;
	struct file *f;
	const void *sa = NULL;
	u32 salen = 0;
	u16 flags = 0;
	int fd;

	if (!hp)
		return 0;
	fd = hp->args[0];
	f = fd_file(fd);
	u32 stk = hp->stack;
	e = rb_reserve(sizeof(*e));
	if (!e) {
		count_lost(LOST_RING);
		return 0;
	}
	__builtin_memset(e->addr, 0, sizeof(e->addr));
	e->path[0] = 0;
	e->family = 0;
	e->port = 0;
	e->bytes = ret > 0 ? ret : 0;
	switch (v->op) {
	case OP_SENDTO:
	case OP_RECVFROM: {
		/* sendto(fd, buf, len, flags, dest_addr, addrlen);
		 * recvfrom(fd, buf, len, flags, src_addr, *addrlen) */
		e->requested = hp->args[2];
		sa = (const void *)hp->args[4];
		if (v->op == OP_SENDTO) {
			salen = hp->args[5];
		} else if (sa && ret >= 0) {
			bpf_probe_read_user(&salen, sizeof(salen), (const void *)hp->args[5]);
		}
		break;
	}
	case OP_SENDMSG:
	case OP_RECVMSG:
	case OP_SENDMMSG:
	case OP_RECVMMSG: {
		/* struct msghdr (user): msg_name @0, msg_namelen @8, msg_iov @16,
		 * msg_iovlen @24; struct mmsghdr: a msghdr, then msg_len @56, 64 bytes. */
		const void *msg = (const void *)hp->args[1];
		u64 iov = 0, iovlen = 0;

		bpf_probe_read_user(&sa, sizeof(sa), msg);
		bpf_probe_read_user(&salen, sizeof(salen), msg + 8);
		bpf_probe_read_user(&iov, sizeof(iov), msg + 16);
		bpf_probe_read_user(&iovlen, sizeof(iovlen), msg + 24);
		e->requested = iov_sum((const struct iovec *)iov, iovlen, &flags);
		if (flags)
			flags = NETF_PARTIAL;
		if (v->op == OP_SENDMMSG || v->op == OP_RECVMMSG) {
			u64 sum = 0;
			u32 n = ret > 0 ? ret : 0;

			for (u32 i = 0; i < NET_MMSG; i++) {
				u32 len = 0;

				if (i >= n)
					break;
				bpf_probe_read_user(&len, sizeof(len), msg + i * 64 + 56);
				sum += len;
			}
			if (n > NET_MMSG)
				flags |= NETF_PARTIAL;
			e->bytes = sum;
		}
		break;
	}
	default:
		e->requested = 0;
	}
	/* A received address is only there when the call succeeded. */
	if ((v->op == OP_RECVFROM || v->op == OP_RECVMSG || v->op == OP_RECVMMSG) && ret < 0)
		sa = NULL;
	if (net_user_addr(e, sa, salen))
		flags |= NETF_PEER_USER;
	else if (ret >= 0 && f && net_sock_addr(e, f))
		flags |= NETF_PEER_SOCK;
	fill_hdr(&e->h, EV_NET, v->op, id, v->ts);
	e->h.stack = stk;
	e->h.flags = flags;
	e->dur = now - v->ts;
	e->file = file_key(f, id, NULL);
	e->ret = ret;
	e->fd = fd;
	bpf_ringbuf_submit(e, wake_flags());
	return 0;
}
