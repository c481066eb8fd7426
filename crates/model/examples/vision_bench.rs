//! Times the vision tower's pieces on random weights with Gemma 3 4B's SigLIP shapes.
//!
//! ```text
//! cargo run --release -p sluice-model --example vision_bench -- gelu [ELEMENTS]
//! cargo run --release -p sluice-model --example vision_bench -- tower [LAYERS] [IMAGE_SIZE] [DTYPE] [UNIT_ROWS]
//! ```
//!
//! `gelu` runs GELU-tanh in place over `ELEMENTS` values (4,304 per row, the tower's MLP width;
//! 4 Mi by default) on one thread: the scalar libm formula the layers ran before the vector
//! kernel, the portable kernel and the kernel [`best_ops`] picks, in elements per second (each
//! pass restores the input first, in the time).
//! `tower` encodes one image with a Gemma-3-4B-shaped tower cut to `LAYERS` layers (1 by
//! default) at `IMAGE_SIZE` pixels a side (448 by default: 1,024 patches; the model's is 896)
//! and prints the wall and process CPU time of the fastest of three runs; `DTYPE` (`f32` by
//! default, `f16`, `bf16`, `q8_0`, ...) is the type its matrices are kept in, as
//! `--vision-dtype` sets it (`bf16` runs the attention in bf16 too); `UNIT_ROWS` (all rows by
//! default) cuts the row-wise stages into units of that many rows, as a server's encode gate
//! does so that it can pause an encoding between them.

use std::time::{Duration, Instant};

use sluice_model::kernels::vector::{best_ops, Portable, VectorOps};
use sluice_model::vision::{Gemma3VisionEncoder, NoPause, Pause, VisionConfig};
use sluice_model::WeightDtype;

mod common;
use common::RandomWeights;

/// CPU time so far (zero where /proc is not there).
fn process_cpu_time() -> Duration {
    common::process_cpu_time().unwrap_or_default()
}

/// PyTorch's formula with libm's `tanhf`, as the layers computed it before the vector kernel.
fn gelu_tanh_libm(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let inner = SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x);
    0.5 * x * (1.0 + inner.tanh())
}

/// GELU-tanh in place over one row.
type RowKernel<'a> = &'a dyn Fn(&mut [f32]);

fn bench_gelu(elements: usize) {
    const WIDTH: usize = 4304;
    let rows = elements.div_ceil(WIDTH);
    // Values like a tower's MLP activations: mostly within ±4.
    let input: Vec<f32> = (0..rows * WIDTH)
        .map(|i| ((i as u32).wrapping_mul(2_654_435_761) as f32 / u32::MAX as f32 - 0.5) * 8.0)
        .collect();
    let ops = best_ops(WIDTH);
    let kernels: [(&str, RowKernel); 3] = [
        ("scalar libm tanhf (before)", &|row| {
            row.iter_mut().for_each(|x| *x = gelu_tanh_libm(*x))
        }),
        ("portable kernel", &|row| Portable.gelu_tanh(row)),
        ("best_ops kernel", &|row| ops.gelu_tanh(row)),
    ];
    println!("gelu_tanh over {rows} rows of {WIDTH} on one thread ({ops:?}):");
    for (label, kernel) in kernels {
        // Passes over the data until half a second has gone by (CPU time counts 10 ms ticks).
        let mut data = input.clone();
        let (wall, cpu) = (Instant::now(), process_cpu_time());
        let mut passes = 0;
        while wall.elapsed() < Duration::from_millis(500) {
            data.copy_from_slice(&input);
            data.chunks_exact_mut(WIDTH).for_each(kernel);
            passes += 1;
        }
        let (wall, cpu) = (wall.elapsed(), process_cpu_time() - cpu);
        let n = (passes * rows * WIDTH) as f64;
        println!(
            "  {label:28} {:7.1} M elements/s wall, {:7.1} M/s CPU",
            n / wall.as_secs_f64() / 1e6,
            n / cpu.as_secs_f64().max(1e-3) / 1e6
        );
        std::hint::black_box(&data);
    }
}

/// Units of so many rows, never pausing.
struct UnitRows(usize);

impl Pause for UnitRows {
    fn point(&self) {}

    fn unit_rows(&self) -> usize {
        self.0
    }
}

fn bench_tower(layers: usize, image_size: usize, dtype: &str, unit_rows: Option<usize>) {
    let dtype = WeightDtype::from_name(dtype).unwrap_or_else(|| panic!("unknown dtype {dtype}"));
    let config = VisionConfig {
        hidden_size: 1152,
        intermediate_size: 4304,
        num_hidden_layers: layers,
        num_attention_heads: 16,
        num_channels: 3,
        image_size,
        patch_size: 14,
        layer_norm_eps: 1e-6,
        mm_tokens_per_image: 256,
        text_hidden_size: 2560,
    };
    let encoder =
        Gemma3VisionEncoder::from_source(&RandomWeights::VISION, config.clone(), Some(dtype))
            .expect("load the tower");
    let pixels: Vec<f32> = (0..config.values_per_image())
        .map(|i| (i % 255) as f32 / 127.5 - 1.0)
        .collect();
    let mut best = (Duration::MAX, Duration::MAX);
    for _ in 0..3 {
        let (wall, cpu) = (Instant::now(), process_cpu_time());
        let pause: &dyn Pause = match unit_rows {
            Some(rows) => &UnitRows(rows),
            None => &NoPause,
        };
        std::hint::black_box(encoder.image_features_with_pauses(&pixels, 1, pause));
        best = best.min((wall.elapsed(), process_cpu_time() - cpu));
    }
    println!(
        "tower: {layers} layer(s), {} patches, units of {}, {}: {:.3} s wall, {:.2} s CPU ({} threads)",
        config.num_patches(),
        unit_rows.map_or("all".to_string(), |r| format!("{r} rows")),
        dtype.ggml_type(),
        best.0.as_secs_f64(),
        best.1.as_secs_f64(),
        rayon::current_num_threads()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize, default: usize| {
        args.get(i)
            .map_or(default, |a| a.parse().expect("a number"))
    };
    match args.first().map(String::as_str) {
        Some("gelu") => bench_gelu(number(1, 4 << 20)),
        Some("tower") => bench_tower(
            number(1, 1),
            number(2, 448),
            args.get(3).map_or("f32", String::as_str),
            args.get(4).map(|a| a.parse().expect("a number")),
        ),
        _ => eprintln!(
            "usage: vision_bench gelu [ELEMENTS] | tower [LAYERS] [IMAGE_SIZE] [DTYPE] [UNIT_ROWS]"
        ),
    }
}
