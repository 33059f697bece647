"""Trains a small CNN on scikit-learn's digits (8x8x1 images, pixels in [0, 1]) and writes the model
fixtures `edgedp deploy` imports (docs/model.md, "Importing TFLite and ONNX"):

digits_cnn_int8.tflite  fully-int8 TFLite (int8 input and output, per-channel weights)
digits_cnn_f32.tflite   the same network in float32
digits_cnn.onnx         the same network as ONNX (float32, NCHW input: tf2onnx's --inputs-as-nchw)
digits_cnn2_int8.tflite a second int8 CNN for the other operator forms: an explicit asymmetric Pad, a
                        strided and a dilated Conv2D, a depth multiplier of 2, Mean without
                        keep_dims, per-tensor FullyConnected weights
unsupported_int8.tflite an int8 model with a TANH (the importer refuses it, naming it)

It needs the optional extra `pip install 'edgedp[convert]'` (tensorflow-cpu and tf2onnx), which
nothing else uses: the committed fixtures are what the tests read. Run from the checkout:
python examples/make_cnn_models.py [OUT_DIR] (default: examples/models/).
The network uses every operator the importer supports at least once: Pad, Conv2D, DepthwiseConv2D,
Add (a residual), MaxPool2D, AveragePool2D, Mean (global average pooling), Reshape,
FullyConnected and a trailing Softmax (replaced by the device's head at import).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

SEED = 0
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "models"


def data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    d = load_digits()
    X = (d.data / 16.0).astype(np.float32).reshape(-1, 8, 8, 1)
    return train_test_split(X, d.target, test_size=0.3, random_state=SEED, stratify=d.target)


def network() -> tf.keras.Model:
    L = tf.keras.layers
    x = inp = L.Input((8, 8, 1), name="image")
    x = L.ZeroPadding2D(1)(x)                                      # PAD
    x = L.Conv2D(12, 3, activation="relu")(x)                      # CONV_2D (VALID), 8x8x12
    y = L.DepthwiseConv2D(3, padding="same", activation="relu6")(x)  # DEPTHWISE_CONV_2D
    y = L.Conv2D(12, 1)(y)
    x = L.ReLU()(L.Add()([x, y]))                                  # ADD (ReLU fused)
    x = L.MaxPooling2D(2)(x)                                       # MAX_POOL_2D, 4x4x12
    x = L.Conv2D(24, 3, strides=1, padding="same", activation="relu")(x)
    a = L.AveragePooling2D(2)(x)                                   # AVERAGE_POOL_2D, 2x2x24
    a = L.GlobalAveragePooling2D(keepdims=True)(a)                 # MEAN over H, W
    x = L.Flatten()(a)                                             # RESHAPE
    x = L.Dense(32, activation="relu")(x)                          # FULLY_CONNECTED
    x = L.Dense(10)(x)
    return tf.keras.Model(inp, L.Softmax()(x))                    # SOFTMAX


def network2() -> tf.keras.Model:
    L = tf.keras.layers
    x = inp = L.Input((8, 8, 1), name="image")
    x = L.ZeroPadding2D(((1, 2), (0, 1)))(x)                       # PAD (asymmetric: not folded)
    x = L.Conv2D(8, 3, strides=2, activation="relu")(x)            # strided VALID conv
    x = L.DepthwiseConv2D(3, depth_multiplier=2, padding="same", activation="relu")(x)
    x = L.Conv2D(16, 3, padding="same", activation="relu6")(x)
    x = L.GlobalAveragePooling2D()(x)                              # MEAN, keep_dims false
    x = L.Dense(10)(x)
    return tf.keras.Model(inp, L.Softmax()(x))


def int8_tflite(model: tf.keras.Model, X: np.ndarray, per_tensor_dense: bool = False) -> bytes:
    def representative():
        for x in X[:300]:
            yield [x[None]]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    if per_tensor_dense:
        conv._experimental_disable_per_channel_quantization_for_dense_layers = True
    return conv.convert()


def main() -> None:
    tf.keras.utils.set_random_seed(SEED)
    X_tr, X_te, y_tr, y_te = data()
    model = network()
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(X_tr, y_tr, epochs=40, batch_size=32, verbose=0)
    print(f"float accuracy on the held-out {len(y_te)}: {model.evaluate(X_te, y_te, verbose=0)[1]:.4f}")
    OUT.mkdir(parents=True, exist_ok=True)

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    (OUT / "digits_cnn_f32.tflite").write_bytes(conv.convert())

    (OUT / "digits_cnn_int8.tflite").write_bytes(int8_tflite(model, X_tr))

    second = network2()
    second.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    second.fit(X_tr, y_tr, epochs=20, batch_size=32, verbose=0)
    print(f"second CNN, float accuracy: {second.evaluate(X_te, y_te, verbose=0)[1]:.4f}")
    (OUT / "digits_cnn2_int8.tflite").write_bytes(int8_tflite(second, X_tr, per_tensor_dense=True))

    L = tf.keras.layers
    inp = L.Input((8, 8, 1))
    tanh = tf.keras.Model(inp, L.Dense(10)(L.Activation("tanh")(L.Dense(8)(L.Flatten()(inp)))))
    (OUT / "unsupported_int8.tflite").write_bytes(int8_tflite(tanh, X_tr))

    import tf2onnx  # after TensorFlow: tf2onnx imports it
    spec = (tf.TensorSpec((1, 8, 8, 1), tf.float32, name="image"),)
    tf2onnx.convert.from_keras(model, input_signature=spec, opset=13, inputs_as_nchw=["image"],
                               output_path=str(OUT / "digits_cnn.onnx"))
    np.savez(OUT / "digits_test.npz", X=X_te.reshape(len(X_te), -1), y=y_te)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
