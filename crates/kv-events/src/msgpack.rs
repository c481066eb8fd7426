//! The MessagePack encoding of the few value kinds KV events use: nil, unsigned integers,
//! 64-bit floats, strings, arrays and maps (each header written before its items). Always the
//! smallest form, as msgspec and every other encoder write them.

/// A MessagePack document being written.
#[derive(Debug, Default)]
pub struct Writer {
    bytes: Vec<u8>,
}

impl Writer {
    /// The encoded bytes.
    pub fn finish(self) -> Vec<u8> {
        self.bytes
    }

    /// `nil`.
    pub fn nil(&mut self) {
        self.bytes.push(0xc0);
    }

    /// An unsigned integer.
    pub fn uint(&mut self, v: u64) {
        let b = &mut self.bytes;
        match v {
            0..=0x7f => b.push(v as u8),
            0x80..=0xff => b.extend([0xcc, v as u8]),
            0x100..=0xffff => {
                b.push(0xcd);
                b.extend((v as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                b.push(0xce);
                b.extend((v as u32).to_be_bytes());
            }
            _ => {
                b.push(0xcf);
                b.extend(v.to_be_bytes());
            }
        }
    }

    /// `Some(v)` as an integer, `None` as nil.
    pub fn opt_uint(&mut self, v: Option<u64>) {
        match v {
            Some(v) => self.uint(v),
            None => self.nil(),
        }
    }

    /// A 64-bit float.
    pub fn f64(&mut self, v: f64) {
        self.bytes.push(0xcb);
        self.bytes.extend(v.to_be_bytes());
    }

    /// A UTF-8 string.
    pub fn str(&mut self, s: &str) {
        let n = s.len();
        let b = &mut self.bytes;
        match n {
            0..=31 => b.push(0xa0 | n as u8),
            32..=0xff => b.extend([0xd9, n as u8]),
            0x100..=0xffff => {
                b.push(0xda);
                b.extend((n as u16).to_be_bytes());
            }
            _ => {
                b.push(0xdb);
                b.extend((n as u32).to_be_bytes());
            }
        }
        b.extend(s.as_bytes());
    }

    /// The header of an array of `n` items.
    pub fn array(&mut self, n: usize) {
        self.header(n, 0x90, 0xdc);
    }

    /// The header of a map of `n` key/value pairs.
    pub fn map(&mut self, n: usize) {
        self.header(n, 0x80, 0xde);
    }

    /// A fix form below 16, else the 16-bit form (`long`) or the 32-bit one after it.
    fn header(&mut self, n: usize, fix: u8, long: u8) {
        let b = &mut self.bytes;
        match n {
            0..=15 => b.push(fix | n as u8),
            16..=0xffff => {
                b.push(long);
                b.extend((n as u16).to_be_bytes());
            }
            _ => {
                b.push(long + 1);
                b.extend((n as u32).to_be_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Writer;

    fn enc(f: impl FnOnce(&mut Writer)) -> Vec<u8> {
        let mut w = Writer::default();
        f(&mut w);
        w.finish()
    }

    /// Byte strings from the MessagePack specification's format table.
    #[test]
    fn every_form_at_its_boundaries() {
        assert_eq!(enc(|w| w.nil()), [0xc0]);
        assert_eq!(enc(|w| w.uint(0)), [0x00]);
        assert_eq!(enc(|w| w.uint(127)), [0x7f]);
        assert_eq!(enc(|w| w.uint(128)), [0xcc, 0x80]);
        assert_eq!(enc(|w| w.uint(256)), [0xcd, 0x01, 0x00]);
        assert_eq!(enc(|w| w.uint(65_536)), [0xce, 0, 1, 0, 0]);
        assert_eq!(
            enc(|w| w.uint(u64::MAX)),
            [0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(enc(|w| w.f64(1.5)), [0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0]);
        assert_eq!(enc(|w| w.str("GPU")), [0xa3, b'G', b'P', b'U']);
        let s32 = "x".repeat(32);
        assert_eq!(enc(|w| w.str(&s32))[..2], [0xd9, 32]);
        let s256 = "x".repeat(256);
        assert_eq!(enc(|w| w.str(&s256))[..3], [0xda, 1, 0]);
        assert_eq!(enc(|w| w.array(3)), [0x93]);
        assert_eq!(enc(|w| w.array(16)), [0xdc, 0, 16]);
        assert_eq!(enc(|w| w.array(70_000)), [0xdd, 0, 1, 0x11, 0x70]);
        assert_eq!(enc(|w| w.map(2)), [0x82]);
        assert_eq!(enc(|w| w.map(16)), [0xde, 0, 16]);
        assert_eq!(enc(|w| w.opt_uint(None)), [0xc0]);
    }
}
