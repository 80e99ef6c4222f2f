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
`engine/data/futurewei_utilization.csv`, the table the engine trains on.
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


# Gavel's job types (stanford-futuredata/gavel, `workloads/pytorch/`): the networks its
# trace commands train, rebuilt here from the architectures those scripts define, so that the
# simulator's utilization baselines can be given each type's utilization as the engine predicts
# it from the declared model (`gavel_job_types.csv` maps each job type to one of these).


def basic_block(x, filters, stride):
    """ResNet's basic block as kuangliu's CIFAR ResNet writes it (Gavel's ResNet-18)."""
    out = layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)(x)
    out = layers.ReLU()(layers.BatchNormalization()(out))
    out = layers.Conv2D(filters, 3, padding="same", use_bias=False)(out)
    out = layers.BatchNormalization()(out)
    if stride != 1 or x.shape[-1] != filters:
        x = layers.Conv2D(filters, 1, strides=stride, use_bias=False)(x)
        x = layers.BatchNormalization()(x)
    return layers.ReLU()(out + x)


def resnet18_cifar10():
    """Gavel's ResNet-18: kuangliu's CIFAR-10 ResNet-18 (32x32 images, 10 classes)."""
    image = keras.Input((32, 32, 3), name="image")
    x = layers.Conv2D(64, 3, padding="same", use_bias=False)(image)
    x = layers.ReLU()(layers.BatchNormalization()(x))
    for filters, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        x = basic_block(x, filters, stride)
        x = basic_block(x, filters, 1)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(image, layers.Dense(10)(x))


def resnet50_imagenet():
    """Gavel's ResNet-50: torchvision's ResNet-50 on ImageNet (224x224, 1000 classes)."""
    return keras.applications.ResNet50(input_shape=(224, 224, 3), weights=None, classes=1000,
                                       classifier_activation=None)


# Gavel's Transformer (attention-is-all-you-need-pytorch on Multi30k, `-proj_share_weight`):
# d_model 512, 2048 inner, 8 heads of 64, 6 encoder and 6 decoder layers. Its batch is in
# sentences, padded to the batch's longest: 32 tokens stands for that length (Multi30k's
# sentences average about 13 tokens). The vocabularies are built from the data at run time;
# 3,000 words each is their order at the preprocessing's minimum count.
TRANSLATION_TOKENS = 32
TRANSLATION_VOCABULARY = 3000


def attention(query, memory, hidden, heads):
    """Multi-head attention written out with dense layers and matrix products, as in bert()."""
    head = hidden // heads

    def split(t):
        t = layers.Reshape((TRANSLATION_TOKENS, heads, head))(t)
        return layers.Permute((2, 1, 3))(t)

    q, k, v = split(layers.Dense(hidden)(query)), split(layers.Dense(hidden)(memory)), split(layers.Dense(hidden)(memory))
    scores = layers.Lambda(lambda a: tf.matmul(a[0], a[1], transpose_b=True) / head**0.5)([q, k])
    weights = layers.Softmax()(scores)
    context = layers.Lambda(lambda a: tf.matmul(a[0], a[1]))([weights, v])
    context = layers.Reshape((TRANSLATION_TOKENS, hidden))(layers.Permute((2, 1, 3))(context))
    return layers.LayerNormalization(epsilon=1e-6)(query + layers.Dense(hidden)(context))


def feed_forward(x, hidden, inner):
    inner_out = layers.ReLU()(layers.Dense(inner)(x))
    return layers.LayerNormalization(epsilon=1e-6)(x + layers.Dense(hidden)(inner_out))


def transformer_multi30k(n_layers=6, hidden=512, inner=2048, heads=8):
    """Gavel's Transformer: encoder-decoder over source and target sentences, the target
    projection onto its vocabulary (the shared embedding weight is counted twice here)."""
    source = keras.Input((TRANSLATION_TOKENS,), dtype="int32", name="source")
    target = keras.Input((TRANSLATION_TOKENS,), dtype="int32", name="target")
    x = PositionEmbedding()(layers.Embedding(TRANSLATION_VOCABULARY, hidden)(source))
    for _ in range(n_layers):
        x = feed_forward(attention(x, x, hidden, heads), hidden, inner)
    y = PositionEmbedding()(layers.Embedding(TRANSLATION_VOCABULARY, hidden)(target))
    for _ in range(n_layers):
        y = attention(y, y, hidden, heads)
        y = feed_forward(attention(y, x, hidden, heads), hidden, inner)
    return keras.Model([source, target], layers.Dense(TRANSLATION_VOCABULARY, use_bias=False)(y))


# Gavel's LM: PyTorch's word-language-model example on WikiText-2 with its defaults: 200-wide
# embedding, two LSTM layers of 200, sequences of 35 tokens (bptt), 33,278 words.
LM_TOKENS = 35
LM_VOCABULARY = 33278


def lstm_layer(x, units, steps):
    """An LSTM over `steps` tokens, unrolled: the input projection of the whole sequence at
    once (as cuDNN computes it), then one recurrent product and four gates per step."""
    projected = layers.Dense(4 * units)(x)
    h = c = None
    outputs = []
    for t in range(steps):
        gates = layers.Lambda(lambda a, t=t: a[:, t, :])(projected)
        if h is not None:
            gates = gates + layers.Dense(4 * units, use_bias=False)(h)
        i, f, g, o = (layers.Lambda(lambda a, k=k: a[:, k * units:(k + 1) * units])(gates)
                      for k in range(4))
        i, f, o = (layers.Activation("sigmoid")(v) for v in (i, f, o))
        g = layers.Activation("tanh")(g)
        c = i * g if c is None else f * c + i * g
        h = o * layers.Activation("tanh")(c)
        outputs.append(layers.Reshape((1, units))(h))
    return layers.Concatenate(axis=1)(outputs)


def lm_wikitext2(units=200):
    """Gavel's LM: embedding, two unrolled LSTM layers, a dense decoder over the vocabulary."""
    tokens = keras.Input((LM_TOKENS,), dtype="int32", name="tokens")
    x = layers.Embedding(LM_VOCABULARY, units)(tokens)
    for _ in range(2):
        x = lstm_layer(x, units, LM_TOKENS)
    return keras.Model(tokens, layers.Dense(LM_VOCABULARY)(x))


# Gavel's Recommendation: recoder's DynamicAutoencoder (one hidden layer of 200, tanh) on
# MovieLens-20M, item-based (`user_based=False`): an example is one item's vector over the
# 116,677 training users of the preprocessing Gavel uses.
RECOMMENDATION_USERS = 116677


def recommendation_ml20m(hidden=200):
    """The autoencoder at full width (its dynamic trimming to the batch's users keeps most of
    them at Gavel's batch sizes)."""
    item = keras.Input((RECOMMENDATION_USERS,), name="item")
    x = layers.Dense(hidden, activation="tanh")(item)
    return keras.Model(item, layers.Dense(RECOMMENDATION_USERS)(x))


def instance_norm(x):
    mean, variance = tf.nn.moments(x, axes=[1, 2], keepdims=True)
    return (x - mean) / tf.sqrt(variance + 1e-5)


def reflect(x, pad):
    return layers.Lambda(lambda a: tf.pad(a, [[0, 0], [pad, pad], [pad, pad], [0, 0]], "REFLECT"))(x)


def cyclegan_generator(blocks=9):
    """PyTorch-GAN's GeneratorResNet: 7x7 in, two downsamplings, nine residual blocks, two
    upsamplings (nearest, then a 3x3 convolution), 7x7 out."""
    image = keras.Input((256, 256, 3))
    x = layers.Conv2D(64, 7)(reflect(image, 3))
    x = layers.ReLU()(layers.Lambda(instance_norm)(x))
    for filters in (128, 256):
        x = layers.Conv2D(filters, 3, strides=2, padding="same")(x)
        x = layers.ReLU()(layers.Lambda(instance_norm)(x))
    for _ in range(blocks):
        y = layers.Conv2D(256, 3)(reflect(x, 1))
        y = layers.ReLU()(layers.Lambda(instance_norm)(y))
        y = layers.Lambda(instance_norm)(layers.Conv2D(256, 3)(reflect(y, 1)))
        x = x + y
    for filters in (128, 64):
        x = layers.Conv2D(filters, 3, padding="same")(layers.UpSampling2D()(x))
        x = layers.ReLU()(layers.Lambda(instance_norm)(x))
    x = layers.Conv2D(3, 7)(reflect(x, 3))
    return keras.Model(image, layers.Activation("tanh")(x))


def cyclegan_discriminator():
    """PyTorch-GAN's PatchGAN discriminator."""
    image = keras.Input((256, 256, 3))
    x = layers.LeakyReLU(0.2)(layers.Conv2D(64, 4, strides=2, padding="same")(image))
    for filters in (128, 256, 512):
        x = layers.Conv2D(filters, 4, strides=2, padding="same")(x)
        x = layers.LeakyReLU(0.2)(layers.Lambda(instance_norm)(x))
    x = layers.ZeroPadding2D(((1, 0), (1, 0)))(x)
    return keras.Model(image, layers.Conv2D(1, 4, padding="same")(x))


def cyclegan():
    """Gavel's CycleGAN (PyTorch-GAN on monet2photo, 256x256, batch 1): one training step runs
    the generators six times (identity, translation, cycle) and the discriminators six times
    (on the translations for the generators' loss, then on real and translated images)."""
    g_ab, g_ba = cyclegan_generator(), cyclegan_generator()
    d_a, d_b = cyclegan_discriminator(), cyclegan_discriminator()
    real_a = keras.Input((256, 256, 3), name="real_a")
    real_b = keras.Input((256, 256, 3), name="real_b")
    identity = [g_ba(real_a), g_ab(real_b)]
    fake_b, fake_a = g_ab(real_a), g_ba(real_b)
    cycle = [g_ba(fake_b), g_ab(fake_a)]
    judged = [d_b(fake_b), d_a(fake_a), d_a(real_a), d_a(fake_a), d_b(real_b), d_b(fake_b)]
    return keras.Model([real_a, real_b], identity + cycle + judged)


def a3c_pong(actions=6, units=512):
    """Gavel's A3C: rl_a3c_pytorch's A3Clstm on Pong (one 80x80 frame, four convolutions
    with max pooling, an LSTM cell of 512, actor and critic heads), one step of a worker."""
    frame = keras.Input((80, 80, 1), name="frame")
    h = keras.Input((units,), name="h")
    c = keras.Input((units,), name="c")
    x = frame
    for filters, kernel, pad in [(32, 5, 2), (32, 5, 1), (64, 4, 1), (64, 3, 1)]:
        x = layers.ZeroPadding2D(pad)(x)
        x = layers.ReLU()(layers.MaxPooling2D(2)(layers.Conv2D(filters, kernel)(x)))
    x = layers.Flatten()(x)
    gates = layers.Dense(4 * units)(x) + layers.Dense(4 * units)(h)
    i, f, g, o = (layers.Lambda(lambda a, k=k: a[:, k * units:(k + 1) * units])(gates)
                  for k in range(4))
    i, f, o = (layers.Activation("sigmoid")(v) for v in (i, f, o))
    c_next = f * c + i * layers.Activation("tanh")(g)
    h_next = o * layers.Activation("tanh")(c_next)
    return keras.Model([frame, h, c], [layers.Dense(1)(h_next), layers.Dense(actions)(h_next)])


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
    "gavel_resnet18_cifar10": resnet18_cifar10,
    "gavel_resnet50_imagenet": resnet50_imagenet,
    "gavel_transformer_multi30k": transformer_multi30k,
    "gavel_lm_wikitext2": lm_wikitext2,
    "gavel_recommendation_ml20m": recommendation_ml20m,
    "gavel_cyclegan_monet2photo": cyclegan,
    "gavel_a3c_pong": a3c_pong,
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
