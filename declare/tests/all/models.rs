//! Summaries of the builder's models, against numbers counted by hand.

use tandem_declare::onnx::build;
use tandem_declare::{ModelSummary, summarize};

const MIB: f64 = 1024.0 * 1024.0;

fn mib(bytes: f64) -> f32 {
    (bytes / MIB) as f32
}

fn gflops(flops: f64) -> f32 {
    (flops * 1e-9) as f32
}

// LeNet, per sample:
// - parameters: conv1 6·1·5·5 + 6 = 156, conv2 16·6·5·5 + 16 = 2416, fc 10·16 + 10 = 170:
//   2742 float32, 10,968 bytes;
// - input: 1·28·28 = 784 floats, 3136 bytes;
// - activations: conv1 6·28·28 = 4704, relu1 4704, pool1 6·14·14 = 1176, conv2 16·10·10 = 1600,
//   relu2 1600, gap 16, flatten 16, fc 10: 13,826 floats, 55,304 bytes;
// - FLOPs: conv1 2·6·1·25·784 = 235,200 + bias 4704; relu1 4704; pool1 4 per output · 1176 =
//   4704; conv2 2·16·6·25·100 = 480,000 + bias 1600; relu2 1600; gap 100 per output · 16 =
//   1600; fc 2·16·10 = 320 + bias 10: 734,442.
const LENET_PARAM_BYTES: f64 = 10_968.0;
const LENET_INPUT_BYTES: f64 = 3_136.0;
const LENET_ACTIVATION_BYTES: f64 = 55_304.0;
const LENET_FLOPS: f64 = 734_442.0;

fn lenet_at(batch: u32) -> ModelSummary {
    let b = f64::from(batch);
    ModelSummary {
        params_mib: mib(LENET_PARAM_BYTES),
        activations_mib: mib(LENET_ACTIVATION_BYTES * b),
        input_mib: mib(LENET_INPUT_BYTES * b),
        batch_size: batch,
        gflops: gflops(LENET_FLOPS * b),
        conv_layers: 2,
        linear_layers: 1,
        activation_layers: 2,
        other_layers: 3,
    }
}

#[test]
fn lenet_at_batch_one_matches_the_hand_count() {
    let summary = summarize(&build::lenet(Some(1)), None).unwrap();
    assert_eq!(summary, lenet_at(1));
}

#[test]
fn lenet_with_a_symbolic_batch_takes_the_batch_size() {
    let summary = summarize(&build::lenet(None), Some(32)).unwrap();
    assert_eq!(summary, lenet_at(32));
}

#[test]
fn lenet_with_a_fixed_batch_reports_it_when_no_batch_size_is_given() {
    let summary = summarize(&build::lenet(Some(4)), None).unwrap();
    assert_eq!(summary, lenet_at(4));
}

#[test]
fn a_fixed_batch_is_scaled_to_the_batch_size_asked_for() {
    let summary = summarize(&build::lenet(Some(4)), Some(8)).unwrap();
    assert_eq!(summary, lenet_at(8));
}

// MLP, per sample:
// - parameters: fc1 784·128 + 128 = 100,480, fc2 128·10 + 10 = 1290: 101,770 float32,
//   407,080 bytes;
// - input: 784 floats, 3136 bytes;
// - activations: fc1.mm 128, fc1.out 128, relu 128, fc2.mm 10, logits 10: 404 floats, 1616
//   bytes;
// - FLOPs: fc1 2·784·128 = 200,704, add 128, relu 128, fc2 2·128·10 = 2560, add 10: 203,530.
#[test]
fn mlp_matches_the_hand_count() {
    let summary = summarize(&build::mlp(None), Some(16)).unwrap();
    assert_eq!(
        summary,
        ModelSummary {
            params_mib: mib(407_080.0),
            activations_mib: mib(1_616.0 * 16.0),
            input_mib: mib(3_136.0 * 16.0),
            batch_size: 16,
            gflops: gflops(203_530.0 * 16.0),
            conv_layers: 0,
            linear_layers: 2,
            activation_layers: 1,
            other_layers: 2,
        }
    );
}
