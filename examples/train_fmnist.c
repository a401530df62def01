/* examples/train_fmnist.c: the main job. Data-parallel training of an mlp
 * or cnn on Fashion-MNIST (1x28x28, IDX files) with the shared loop of
 * examples/train_loop.h: flags, sharding, DistributedOptimizer, test
 * accuracy each epoch, atomic checkpoints and bitwise --resume.
 *
 *   mpirun -np N examples/train_fmnist [--model mlp|cnn] [--epochs E]
 *       [--batch-size B] [--lr LR] [--seed S] [--data DIR]
 *       [--normalize on|off] [--checkpoint PATH] [--resume]
 *       [--max-steps K] [--train-limit N] [--device cpu]
 *       [--progress auto|bar|lines]
 *
 * Exit status: 0, 1 (data, checkpoint or training error), 2 (bad flags).
 */
#include "examples/data.h"
#include "examples/train_loop.h"

int main(int argc, char **argv)
{
    static const train_loop_config_t fmnist = {
        .name = "train_fmnist",
        .data_what = "Fashion-MNIST IDX files",
        .data_dir = DATA_FMNIST_DIR,
        .load = data_idx_load,
        .channels = 1, .height = 28, .width = 28,
        .mean = DATA_FMNIST_MEAN, .std = DATA_FMNIST_STD,
        .ckpt_tag = NULL, /* "mlp", "cnn": older checkpoints resume */
    };
    return train_loop_main(&fmnist, argc, argv);
}
