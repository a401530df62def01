/* examples/train_cifar10.c: data-parallel training of an mlp or cnn on
 * CIFAR-10 (3x32x32, the binary batches data_batch_1.bin ..
 * data_batch_5.bin and test_batch.bin) with the shared loop of
 * examples/train_loop.h; the same flags as train_fmnist.
 *
 *   mpirun -np N examples/train_cifar10 [--model mlp|cnn] [--epochs E]
 *       [--batch-size B] [--lr LR] [--seed S] [--data DIR]
 *       [--normalize on|off] [--checkpoint PATH] [--resume]
 *       [--max-steps K] [--train-limit N] [--device cpu]
 *       [--progress auto|bar|lines]
 *
 * Checkpoints name their model "mlp.c10" or "cnn.c10", so train_fmnist
 * refuses them by name (and this program train_fmnist's).
 * Exit status: 0, 1 (data, checkpoint or training error), 2 (bad flags).
 */
#include "examples/data.h"
#include "examples/train_loop.h"

int main(int argc, char **argv)
{
    static const train_loop_config_t cifar10 = {
        .name = "train_cifar10",
        .data_what = "CIFAR-10 binary batches",
        .data_dir = DATA_CIFAR_DIR,
        .load = data_cifar_load,
        .channels = 3, .height = 32, .width = 32,
        .mean = DATA_CIFAR_MEAN, .std = DATA_CIFAR_STD,
        .ckpt_tag = "c10",
    };
    return train_loop_main(&cifar10, argc, argv);
}
