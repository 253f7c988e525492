def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
assert crc32c(b"123456789") == 0xE3069283
if __name__ == "__main__":
    for k in range(32, 56):
        p = crc32c(f"list{k}".encode()) % 64
        print(k, p, p % 3)
