"""Role names of a campaign, and the state partition each one lands in.

A role's partition of __coordination_state is Kafka's murmur2 of the role
name, made positive with toPositive, modulo the partition count (the core's
partition.rs). The campaign picks names so that the first two roles share a
partition and the others land elsewhere.
"""

M = 0x5BD1E995
MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (Utils.murmur2), as a signed 32-bit value."""
    length = len(data)
    h = (0x9747B28C ^ length) & MASK
    for i in range(length // 4):
        j = 4 * i
        k = data[j] | (data[j + 1] << 8) | (data[j + 2] << 16) | (data[j + 3] << 24)
        k = (k * M) & MASK
        k ^= k >> 24
        k = (k * M) & MASK
        h = (h * M) & MASK
        h ^= k
    rest = length % 4
    tail = length & ~3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * M) & MASK
    h ^= h >> 13
    h = (h * M) & MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def role_partition(role: str, partitions: int) -> int:
    """The state partition of `role` for a topic of `partitions` partitions."""
    return (murmur2(role.encode()) & 0x7FFFFFFF) % partitions


def pick_roles(prefix: str, count: int, partitions: int) -> list:
    """`count` (at least 3) role names starting with `prefix`: the first two
    share a state partition, every other one has a partition of its own."""
    if count < 3:
        raise ValueError("a campaign needs at least 3 roles")
    if partitions < 2:
        raise ValueError("the state topic needs at least 2 partitions to separate roles")
    first = f"{prefix}-r1"
    shared = role_partition(first, partitions)
    roles = [first]
    used = {shared}
    k = 0
    while len(roles) < 2:
        name = f"{prefix}-r2-{k}"
        if role_partition(name, partitions) == shared:
            roles.append(name)
        k += 1
    i = 3
    k = 0
    while len(roles) < count:
        name = f"{prefix}-r{i}-{k}"
        p = role_partition(name, partitions)
        if p not in used or len(used) >= partitions:
            roles.append(name)
            used.add(p)
            i += 1
        k += 1
    return roles


def _self_test():
    # Kafka's UtilsTest.testMurmur2 reference values (also in core/src/partition.rs)
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107
    assert role_partition("21", 16) == 12  # toPositive masks, it is not abs()
    roles = pick_roles("t", 4, 16)
    parts = [role_partition(r, 16) for r in roles]
    assert parts[0] == parts[1] and len(set(parts)) == 3, parts


if __name__ == "__main__":
    _self_test()
    print("roles: murmur2 matches Kafka's reference values")
