import triton


def block_for(hidden: int) -> int:
    return triton.next_power_of_2(hidden)


def warps_for(block: int) -> int:
    return min(max(block // 256, 1), 8)
