"""The built-in Vision Transformers: ViT-Ti/16, S/16, B/16 and L/16, pre-norm.

Dosovitskiy et al. 2021, written like the ResNets (functional Keras, channels-last
images in, float32 logits out). Each block is x + attention(LayerNorm(x)), then
x + MLP(LayerNorm(x)) with an exact GELU, as torchvision's `vit_b_16`; patches of
16x16 pixels embedded by one 16x16/16 convolution, a learned position embedding.

Pooling: the mean of the patch tokens after the last LayerNorm, no class token (Beyer
et al. 2022, "Better plain ViT baselines for ImageNet-1k", big_vision's
`pool_type="gap"`: as accurate as the class token on ImageNet). Why: at 224 px the
sequence is then 196 tokens, not 197. JAX's cuDNN flash attention, which
`keras.ops.dot_product_attention` picks on NVIDIA GPUs, refuses an odd length in
training when a mask or bias goes with it ("Unsupported sequence length Q 197, KV
197", `check_is_flash_attention` in jax/_src/cudnn/fused_attention_stablehlo.py);
196 is even, no mask is passed, and every head is 64 wide (cuDNN: a multiple of 8,
at most 128 before Hopper), so the fused kernel serves every variant at 224 px. It
also drops one token's work (0.5%) and the class token's 2 x width parameters: ViT-B/16
has 86,566,120 for 1,000 classes, torchvision's `vit_b_16` 86,567,656.

No dropout or stochastic depth; the recipe (AdamW, warm-up and cosine, label
smoothing, no decay on norms and biases, gradient clipping) is flags.config's
RECIPES["vit"], chosen for these models unless flags override it.
"""

from __future__ import annotations

import keras
from keras import layers, ops

PATCH = 16
LAYER_NORM_EPSILON = 1e-6  # torchvision's and big_vision's
# name -> (width, depth, heads, MLP width); every head is 64 wide.
VITS = {
    "vit_ti16": (192, 12, 3, 768),
    "vit_s16": (384, 12, 6, 1536),
    "vit_b16": (768, 12, 12, 3072),
    "vit_l16": (1024, 24, 16, 4096),
}
NAMES = tuple(VITS)


def _flash_attention():
    """None (fused attention where the backend has it) unless Keras's switch is off
    (keras.config.disable_flash_attention(); app/models/flops.py counts that way)."""
    return False if keras.config.is_flash_attention_enabled() is False else None


@keras.saving.register_keras_serializable("bench")
class PositionEmbedding(layers.Layer):
    """Adds a learned embedding (normal, std 0.02) to each token of (batch, tokens, width)."""

    def build(self, input_shape):
        self.embedding = self.add_weight(
            name="position_embedding", shape=(1, *input_shape[1:]),
            initializer=keras.initializers.RandomNormal(stddev=0.02))

    def call(self, inputs):
        return inputs + ops.cast(self.embedding, inputs.dtype)


@keras.saving.register_keras_serializable("bench")
class SelfAttention(layers.Layer):
    """Multi-head self-attention: one fused q/k/v projection, scaled dot-product
    attention (`keras.ops.dot_product_attention`, batch-tokens-heads-depth layout, no
    mask: what cuDNN's flash attention takes), an output projection.

    Args:
        width: the tokens' width (heads x 64 here).
        num_heads: attention heads; width must divide by it.
    """

    def __init__(self, width: int, num_heads: int, **kwargs):
        super().__init__(**kwargs)
        if width % num_heads:
            raise ValueError(f"width {width} does not divide into {num_heads} heads")
        self.width, self.num_heads = int(width), int(num_heads)
        self.qkv = layers.Dense(3 * width, name="qkv", dtype=self.dtype_policy)
        self.out = layers.Dense(width, name="out", dtype=self.dtype_policy)

    def build(self, input_shape):
        self.qkv.build(input_shape)
        self.out.build(input_shape)

    def call(self, inputs):
        tokens = inputs.shape[1]
        qkv = ops.reshape(self.qkv(inputs),
                          (-1, tokens, 3, self.num_heads, self.width // self.num_heads))
        y = ops.dot_product_attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2],
                                      flash_attention=_flash_attention())
        return self.out(ops.reshape(y, (-1, tokens, self.width)))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "width": self.width, "num_heads": self.num_heads}


def _block(x, name, width, heads, mlp):
    y = layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name=name + "_norm1")(x)
    y = SelfAttention(width, heads, name=name + "_attention")(y)
    x = layers.Add(name=name + "_add1")([x, y])
    y = layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name=name + "_norm2")(x)
    y = layers.Dense(mlp, activation="gelu", name=name + "_mlp1")(y)  # exact GELU, as torch's
    return layers.Add(name=name + "_add2")([x, layers.Dense(width, name=name + "_mlp2")(y)])


def make_vit(name: str, num_classes: int, image_size: int) -> keras.Model:
    """The ViT called `name` (VITS) for square images of `image_size` (a multiple of 16).

    Raises:
        ValueError: an image size that 16x16 patches do not tile.
    """
    width, depth, heads, mlp = VITS[name]
    if image_size % PATCH:
        raise ValueError(f"{name} cuts images into {PATCH}x{PATCH} patches; image size "
                         f"{image_size} is not a multiple of {PATCH}")
    inputs = keras.Input((image_size, image_size, 3), name="images")
    x = layers.Conv2D(width, PATCH, strides=PATCH, kernel_initializer="lecun_normal",
                      name="patch_embedding")(inputs)
    x = layers.Reshape(((image_size // PATCH) ** 2, width), name="tokens")(x)
    x = PositionEmbedding(name="position")(x)
    for index in range(depth):
        x = _block(x, f"block{index + 1}", width, heads, mlp)
    x = layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="norm")(x)
    x = layers.GlobalAveragePooling1D(name="avg_pool")(x)
    # float32 logits even under a mixed policy; a zero head starts every class equal.
    logits = layers.Dense(num_classes, kernel_initializer="zeros", dtype="float32",
                          name="logits")(x)
    return keras.Model(inputs, logits, name=name)
