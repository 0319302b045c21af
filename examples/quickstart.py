"""The five-minute tour: run functions on the cluster's GPUs from Python.

    make demo            # builds everything and runs this file
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import bulletin  # noqa: E402
from _local_cluster import local_cluster  # noqa: E402


@bulletin.gpu
def train(n):
    import os
    print("training on", os.environ.get("CUDA_VISIBLE_DEVICES"))
    return sum(i * i for i in range(n))


class Config:
    def __init__(self, lr):
        self.lr = lr


def main():
    with local_cluster() as client:
        print(client.status(), "\n")

        print("train(10) ->", train(10))                       # blocks, streams the remote print
        f = train.submit(10)                                   # a bulletin.Future
        print("train.submit(10).result() ->", f.result(), f.status)
        print("timings:", {k: f"{v * 1e3:.2f} ms" for k, v in f.timings.items()})

        print("lambda ->", client.submit(lambda x: x + 1, 41).result())
        print("class ->", client.submit(lambda c: Config(c.lr * 10), Config(0.1)).result().lr)
        print("map(pow) ->", [f.result() for f in client.map(pow, [2, 3], [5, 2])])

        try:
            client.submit(lambda: 1 / 0).result()
        except ZeroDivisionError as error:
            print("remote exception came back as", type(error).__name__)

        try:
            client.submit(train, 10, gpus=64).result()
        except bulletin.InfeasibleError as error:
            print("asking for 64 GPUs:", error)


if __name__ == "__main__":
    main()
