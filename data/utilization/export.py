"""Writes the networks behind the Futurewei utilization measurements as ONNX graphs.

The Futurewei mini-ML data set (CentaurusInfra/alnair, `open-data/gpu-sharing`) measured the
maximum GPU utilization (MGUP) of 49 TensorFlow training runs on one Tesla P100. Its training
scripts, in the same folder, name the networks; this script rebuilds each network from the
public architecture with Keras (random weights: utilization does not depend on their values)
and writes it as ONNX for a batch of one, the way a user would declare a model to Tandem
(`tandem declare FILE --batch-size N` scales input, activations and FLOPs to the batch; a
symbolic batch would leave TensorFlow's computed reshapes without static shapes).

Weights are dropped from the files after export (every float initializer keeps its shape and
type, not its values), so the files stay small; Tandem's declared mode reads only shapes.
Small integer initializers (reshape targets, axes) are kept: shape inference needs them.

Run once, by hand (it needs TensorFlow, which the build never does):

    python3 -m venv /tmp/tf && /tmp/tf/bin/pip install tensorflow-cpu tf2onnx onnx
    /tmp/tf/bin/python data/utilization/export.py data/utilization/onnx

Then `cargo xtask utilization-data` summarizes the files with `tandem-declare` and writes
`plugin/engine/data/futurewei_utilization.csv`, the table the engine trains on.
"""

import os
import sys

import onnx
import tensorflow as tf
import tf2onnx
from onnx import shape_inference

keras = tf.keras
layers = keras.layers

GTSRB_CLASSES = 43
# BERT's preprocessing model (bert_en_uncased_preprocess/3) pads or cuts to 128 tokens.
SEQUENCE = 128
VOCABULARY = 30522


def classifier(backbone_fn):
    """A TF-Hub-style feature vector at 224x224 with a dense head over GTSRB's classes."""
    inputs = keras.Input((224, 224, 3), name="image")
    backbone = backbone_fn(input_shape=(224, 224, 3), include_top=False, pooling="avg", weights=None)
    return keras.Model(inputs, layers.Dense(GTSRB_CLASSES)(backbone(inputs)))


def efficientnet_v2_s(**kwargs):
    return keras.applications.EfficientNetV2S(include_preprocessing=False, **kwargs)


class PositionEmbedding(layers.Layer):
    """BERT's learned position embedding, added to the token embeddings."""

    def build(self, input_shape):
        self.table = self.add_weight(shape=(input_shape[1], input_shape[2]), name="positions")

    def call(self, x):
        return x + self.table


def erf_gelu(x):
    """BERT's exact GELU, written with erf (Keras' own uses erfc, which ONNX lacks)."""
    return 0.5 * x * (1.0 + tf.math.erf(x / 2.0**0.5))


def bert(n_layers, hidden, heads):
    """BERT's encoder (L layers, H hidden, A heads, 4H feed-forward) with the IMDB head.

    Attention is written out with dense layers and matrix products so that every projection
    is a MatMul by a weight, as in BERT's own graph.
    """
    ids = keras.Input((SEQUENCE,), dtype="int32", name="word_ids")
    types = keras.Input((SEQUENCE,), dtype="int32", name="type_ids")
    x = layers.Embedding(VOCABULARY, hidden)(ids)
    x = x + layers.Embedding(2, hidden)(types)
    x = PositionEmbedding()(x)
    x = layers.LayerNormalization(epsilon=1e-12)(x)
    head = hidden // heads

    def split(t):
        t = layers.Reshape((SEQUENCE, heads, head))(t)
        return layers.Permute((2, 1, 3))(t)

    for _ in range(n_layers):
        q, k, v = (split(layers.Dense(hidden)(x)) for _ in range(3))
        scores = layers.Lambda(lambda a: tf.matmul(a[0], a[1], transpose_b=True) / head**0.5)([q, k])
        weights = layers.Softmax()(scores)
        context = layers.Lambda(lambda a: tf.matmul(a[0], a[1]))([weights, v])
        context = layers.Reshape((SEQUENCE, hidden))(layers.Permute((2, 1, 3))(context))
        x = layers.LayerNormalization(epsilon=1e-12)(x + layers.Dense(hidden)(context))
        inner = layers.Lambda(erf_gelu)(layers.Dense(4 * hidden)(x))
        x = layers.LayerNormalization(epsilon=1e-12)(x + layers.Dense(hidden)(inner))
    pooled = layers.Dense(hidden, activation="tanh")(x[:, 0, :])
    return keras.Model([ids, types], layers.Dense(1)(pooled))


def dcgan():
    """TensorFlow's DCGAN tutorial: one training step runs the generator on a batch of noise
    and the discriminator on the real and the generated batch."""
    generator = keras.Sequential([
        keras.Input((100,)),
        layers.Dense(7 * 7 * 256, use_bias=False), layers.BatchNormalization(), layers.LeakyReLU(),
        layers.Reshape((7, 7, 256)),
        layers.Conv2DTranspose(128, 5, strides=1, padding="same", use_bias=False),
        layers.BatchNormalization(), layers.LeakyReLU(),
        layers.Conv2DTranspose(64, 5, strides=2, padding="same", use_bias=False),
        layers.BatchNormalization(), layers.LeakyReLU(),
        layers.Conv2DTranspose(1, 5, strides=2, padding="same", use_bias=False, activation="tanh"),
    ])
    discriminator = keras.Sequential([
        keras.Input((28, 28, 1)),
        layers.Conv2D(64, 5, strides=2, padding="same"), layers.LeakyReLU(), layers.Dropout(0.3),
        layers.Conv2D(128, 5, strides=2, padding="same"), layers.LeakyReLU(), layers.Dropout(0.3),
        layers.Flatten(), layers.Dense(1),
    ])
    noise = keras.Input((100,), name="noise")
    images = keras.Input((28, 28, 1), name="images")
    return keras.Model([noise, images], [discriminator(images), discriminator(generator(noise))])


def unet():
    """TensorFlow's segmentation tutorial: a MobileNetV2 encoder at 128x128 and pix2pix
    upsampling blocks."""
    base = keras.applications.MobileNetV2(input_shape=(128, 128, 3), include_top=False, weights=None)
    names = ["block_1_expand_relu", "block_3_expand_relu", "block_6_expand_relu",
             "block_13_expand_relu", "block_16_project"]
    down = keras.Model(base.input, [base.get_layer(n).output for n in names])
    inputs = keras.Input((128, 128, 3), name="image")
    skips = down(inputs)
    x = skips[-1]
    for filters, skip in zip([512, 256, 128, 64], reversed(skips[:-1])):
        x = layers.Conv2DTranspose(filters, 3, strides=2, padding="same", use_bias=False)(x)
        x = layers.ReLU()(layers.BatchNormalization()(x))
        x = layers.Concatenate()([x, skip])
    x = layers.Conv2DTranspose(3, 3, strides=2, padding="same")(x)
    return keras.Model(inputs, x)


def dqn():
    """TF-Agents' DQN tutorial on CartPole: a Q network of 100 and 50 units."""
    observation = keras.Input((4,), name="observation")
    x = layers.Dense(100, activation="relu")(observation)
    x = layers.Dense(50, activation="relu")(x)
    return keras.Model(observation, layers.Dense(2)(x))


NETWORKS = {
    "mobilenet_v1": lambda: classifier(keras.applications.MobileNet),
    "nasnet_mobile": lambda: classifier(keras.applications.NASNetMobile),
    "efficientnet_v2_s": lambda: classifier(efficientnet_v2_s),
    "resnet50": lambda: classifier(keras.applications.ResNet50),
    "inception_v3": lambda: classifier(keras.applications.InceptionV3),
    "bert_L-2_H-128_A-2": lambda: bert(2, 128, 2),
    "bert_L-2_H-256_A-4": lambda: bert(2, 256, 4),
    "bert_L-2_H-512_A-8": lambda: bert(2, 512, 8),
    "bert_L-2_H-768_A-12": lambda: bert(2, 768, 12),
    "bert_L-4_H-128_A-2": lambda: bert(4, 128, 2),
    "bert_L-4_H-256_A-4": lambda: bert(4, 256, 4),
    "bert_L-4_H-512_A-8": lambda: bert(4, 512, 8),
    "dcgan": dcgan,
    "unet_mobilenet_v2": unet,
    "dqn_cartpole": dqn,
}


def export(name, model, out_dir):
    spec = tuple(
        tf.TensorSpec((1,) + tuple(i.shape[1:]), i.dtype, name=i.name.split(":")[0])
        for i in model.inputs
    )

    @tf.function(input_signature=spec)
    def forward(*args):
        return model(list(args) if len(args) > 1 else args[0], training=False)

    proto, _ = tf2onnx.convert.from_function(forward, input_signature=spec, opset=17)
    proto = shape_inference.infer_shapes(proto)
    for init in proto.graph.initializer:
        if init.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE):
            init.ClearField("raw_data")
            init.ClearField("float_data")
            init.ClearField("double_data")
            init.ClearField("int32_data")
    path = os.path.join(out_dir, name + ".onnx")
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())
    print(f"{name}: {len(proto.graph.node)} nodes, {os.path.getsize(path)} bytes")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "onnx"
    os.makedirs(out_dir, exist_ok=True)
    only = sys.argv[2:]
    for name, build in NETWORKS.items():
        if not only or name in only:
            export(name, build(), out_dir)


if __name__ == "__main__":
    main()
