//! Intel AMX (Advanced Matrix Extensions, Xeons since Sapphire Rapids): what the integer
//! formats' AMX kernels share. Eight tile registers of up to 16 rows × 64 bytes; one
//! `tdpbsud` multiplies a tile of signed activation bytes (rows × K) by a tile of unsigned
//! weight bytes (K/4 rows of 16 outputs' 4 bytes: the VNNI kernels' group layout) into 16 × 16
//! exact i32 sums, 16,384 byte products in one instruction.
//!
//! This file asks whether the process may use AMX ([`usable`]: CPUID, XCR0, and Linux's
//! per-process permission, requested once), describes a tile configuration ([`TileConfig`]) and
//! wraps the few tile instructions the kernels use. Stable Rust has no AMX intrinsics, so they
//! are inline assembly; tile register numbers are part of the instruction, hence the macros.

/// Whether this process may run AMX-INT8 tile instructions: the CPU has AMX-TILE and
/// AMX-INT8, the OS saves tile state (XCR0 bits 17 and 18), and Linux granted this process the
/// tile data permission (`arch_prctl(ARCH_REQ_XCOMP_PERM)`, asked here once; without it the
/// first tile instruction is a SIGILL). Asked by `Isa` detection only.
pub(crate) fn usable() -> bool {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        use std::arch::x86_64::{__cpuid, __cpuid_count};
        let (leaf1, leaf7) = (__cpuid(1), __cpuid_count(7, 0));
        let osxsave = leaf1.ecx & (1 << 27) != 0;
        let tile = leaf7.edx & (1 << 24) != 0;
        let int8 = leaf7.edx & (1 << 25) != 0;
        if !(osxsave && tile && int8) {
            return false;
        }
        const XTILE: u64 = 0b11 << 17;
        // SAFETY: OSXSAVE is set, so XGETBV may be executed.
        if unsafe { xcr0() } & XTILE != XTILE {
            return false;
        }
        request_tile_permission()
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    false
}

/// XCR0, the features whose state the OS saves. Safety: CPUID.1:ECX.OSXSAVE must be set.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
unsafe fn xcr0() -> u64 {
    let (lo, hi): (u32, u32);
    std::arch::asm!("xgetbv", in("ecx") 0u32, out("eax") lo, out("edx") hi,
        options(nomem, nostack, preserves_flags));
    u64::from(hi) << 32 | u64::from(lo)
}

/// Asks Linux for the tile data state (granted per process, for every thread); whether it was
/// granted. A kernel before 5.16, or a seccomp policy that refuses it, leaves AMX unused.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn request_tile_permission() -> bool {
    const ARCH_GET_XCOMP_PERM: libc::c_long = 0x1022;
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: arch_prctl with these codes reads or writes only the given integer.
    let requested = unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_REQ_XCOMP_PERM,
            XFEATURE_XTILEDATA,
        )
    };
    if requested != 0 {
        return false;
    }
    let mut granted: u64 = 0;
    // SAFETY: as above; `granted` outlives the call.
    let read = unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_GET_XCOMP_PERM,
            &mut granted as *mut u64,
        )
    };
    read == 0 && granted & (1 << XFEATURE_XTILEDATA) != 0
}

/// A tile configuration (palette 1): the rows and bytes a row of each of the 8 tile registers.
#[repr(C, align(64))]
pub(crate) struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    /// Bytes a row of tile `t` (at most 64).
    colsb: [u16; 16],
    /// Rows of tile `t` (at most 16).
    rows: [u8; 16],
}

impl TileConfig {
    /// No tile configured.
    pub(crate) const fn new() -> Self {
        Self {
            palette: 1,
            start_row: 0,
            reserved: [0; 14],
            colsb: [0; 16],
            rows: [0; 16],
        }
    }

    /// Tile `t` holds `rows` rows of `bytes` bytes.
    pub(crate) const fn with(mut self, t: usize, rows: usize, bytes: usize) -> Self {
        assert!(t < 8 && rows <= 16 && bytes <= 64);
        self.rows[t] = rows as u8;
        self.colsb[t] = bytes as u16;
        self
    }

    /// Loads this configuration (zeroing every tile), runs `f`, and releases the tile state,
    /// so a thread holds AMX state only inside a kernel. Safety: [`usable`] must have said yes.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(crate) unsafe fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        std::arch::asm!("ldtilecfg [{}]", in(reg) self as *const Self,
            options(nostack, readonly, preserves_flags));
        let result = f();
        std::arch::asm!("tilerelease", options(nostack, nomem, preserves_flags));
        result
    }
}

/// `tilezero tmmT`.
macro_rules! tile_zero {
    ($t:literal) => {
        std::arch::asm!(
            concat!("tilezero tmm", $t),
            options(nostack, nomem, preserves_flags)
        )
    };
}

/// `tileloadd tmmT, [ptr + stride]`: the tile's rows from `ptr`, `stride` bytes apart.
macro_rules! tile_load {
    ($t:literal, $ptr:expr, $stride:expr) => {
        std::arch::asm!(concat!("tileloadd tmm", $t, ", [{p} + {s}]"),
            p = in(reg) $ptr, s = in(reg) $stride,
            options(nostack, readonly, preserves_flags))
    };
}

/// `tilestored [ptr + stride], tmmT`.
macro_rules! tile_store {
    ($t:literal, $ptr:expr, $stride:expr) => {
        std::arch::asm!(concat!("tilestored [{p} + {s}], tmm", $t),
            p = in(reg) $ptr, s = in(reg) $stride, options(nostack, preserves_flags))
    };
}

/// `tdpbsud tmmC, tmmA, tmmB`: `C[m][n] += Σ_k A[m][k] · B[k / 4][4n + k % 4]`, signed bytes
/// of `A` times unsigned bytes of `B`, exact in i32.
macro_rules! tile_dot_signed_unsigned {
    ($c:literal, $a:literal, $b:literal) => {
        std::arch::asm!(
            concat!("tdpbsud tmm", $c, ", tmm", $a, ", tmm", $b),
            options(nostack, nomem, preserves_flags)
        )
    };
}

pub(crate) use {tile_dot_signed_unsigned, tile_load, tile_store, tile_zero};
