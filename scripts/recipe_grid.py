"""The decoder knob study's GPU rounds (docs/pretraining.md#knob-study): one pretrain command per line,
each a single run named by `run_name` under sweeps/recipe/, its output in sweeps/recipe/logs/<name>.log.

    python -m scripts.recipe_grid --round 2 | xargs -P 12 -I{} sh -c '{}'   # one GPU: about 4 minutes
    python -m scripts.recipe_table --compact --target 5.719                 # the table

Round 1 tried rates, warmups and schedules at the 4 x 128 decoder's own shape, other shapes, half the
batch, longer runs and block details; round 2 followed up with longer warmups, since round 1's 25-step
warmup was far worse at every rate. Shapes run the steps that take, on a 2-core CPU, the time of 500
steps of the 4 x 128 decoder (milliseconds per step measured side by side on one host: 4 x 128 397,
4 x 96 310, 4 x 64 238, 2 x 128 315, 2 x 96 265, 2 x 64 207, 4 x 192 585, 6 x 128 460), so their
curves compare at equal CPU time. The encoder lines check the encoder at 96 and 64 wide.
"""

from __future__ import annotations

import argparse

DECODER = "model=gpt_tiny_rope objective=clm optim=adamw_decoder tokenizer=bpe"
ENCODER = "model=bert_tiny_rope objective=roberta_mask40 optim=adamw tokenizer=wordpiece"
LINEAR_TO_ZERO = "optim.schedule=linear optim.min_lr_ratio=0.0"
COSINE = "optim.schedule=cosine optim.min_lr_ratio=0.1"
SHAPES = {  # name: (steps at the CPU time of 500 steps of 4 x 128, overrides)
    "d64L2": (959, "model.d_model=64 model.d_ff=256 model.n_layers=2"),
    "d64L3": (894, "model.d_model=64 model.d_ff=256 model.n_layers=3"),
    "d64L4": (834, "model.d_model=64 model.d_ff=256"),
    "d96L2": (778, "model.d_model=96 model.d_ff=384 model.n_layers=2"),
    "d96L4": (640, "model.d_model=96 model.d_ff=384"),
    "d128L2": (630, "model.n_layers=2"),
    "d128L6": (432, "model.n_layers=6"),
    "d192L4": (339, "model.d_model=192 model.d_ff=768"),
}


def command(name: str, base: str, steps: int, every: int, extra: str = "") -> str:
    return (
        f"mkdir -p sweeps/recipe/logs && python pipelines/pretrain.py sweep=recipe {base} trainer.max_steps={steps} "
        f"trainer.val_check_interval={every} train.checkpoint_every={steps} run_name={name} {extra}"
        f" > sweeps/recipe/logs/{name}.log 2>&1"
    )


def every(steps: int) -> int:
    return max(50, steps // 10 // 10 * 10)


def round_1() -> list[str]:
    runs = [
        command("cal_default", DECODER, 500, 50),
        command("cal_v1", "model=gpt_tiny objective=clm optim=adamw tokenizer=bpe", 500, 50),
        command("cal_enc", ENCODER, 800, 100, "trainer=cpu_encoder"),
    ]
    for lr in ("4e-3", "6e-3", "1e-2", "1.5e-2"):
        for warmup in (25, 100):
            for schedule, overrides in (("cos", COSINE), ("lin0", LINEAR_TO_ZERO)):
                if (lr, warmup, schedule) != ("6e-3", 100, "cos"):  # cal_default
                    runs.append(
                        command(
                            f"A_lr{lr}_w{warmup}_{schedule}",
                            DECODER,
                            500,
                            50,
                            f"optim.lr={lr} optim.warmup_steps={warmup} {overrides}",
                        )
                    )
    for name in ("d96L4", "d64L4", "d128L2", "d64L2", "d192L4", "d128L6"):
        steps, shape = SHAPES[name]
        for lr in ("6e-3", "1e-2", "2e-2"):
            runs.append(
                command(
                    f"B_{name}_s{steps}_lr{lr}",
                    DECODER,
                    steps,
                    every(steps),
                    f"{shape} optim.lr={lr} optim.warmup_steps=25 {LINEAR_TO_ZERO}",
                )
            )
    for lr in ("4e-3", "6e-3", "1e-2"):
        runs.append(
            command(
                f"C_b16_lr{lr}",
                DECODER,
                1000,
                100,
                f"train.batch_size=16 optim.lr={lr} optim.warmup_steps=50 {LINEAR_TO_ZERO}",
            )
        )
    for steps in (1500, 3000, 6000):
        runs.append(command(f"D_default_s{steps}", DECODER, steps, steps // 10))
        runs.append(
            command(
                f"D_lr1e-2_w25_lin0_s{steps}",
                DECODER,
                steps,
                steps // 10,
                f"optim.lr=1e-2 optim.warmup_steps=25 {LINEAR_TO_ZERO}",
            )
        )
    q = f"optim.lr=1e-2 optim.warmup_steps=25 {LINEAR_TO_ZERO}"
    for name, extra in (
        ("E_beta99", "optim.betas=[0.9,0.99]"),
        ("E_wd0", "optim.weight_decay=0.0"),
        ("F_swiglu", "model.activation=swiglu model.d_ff=344"),
        ("F_rms", "model.norm=rms"),
        ("H_untied", "model.tie_embeddings=false"),
        ("F_heads2", "model.n_heads=2"),
        ("F_heads8", "model.n_heads=8"),
    ):
        runs.append(command(name, DECODER, 500, 50, f"{q} {extra}"))
    for steps in (500, 800):
        for lr in ("2e-3", "4e-3"):
            runs.append(
                command(
                    f"Enc_s{steps}_lr{lr}_w25_lin0",
                    ENCODER,
                    steps,
                    100,
                    f"optim.lr={lr} optim.warmup_steps=25 {LINEAR_TO_ZERO}",
                )
            )
    runs.append(
        command(
            "Enc_d96_s1000_lr3e-3",
            ENCODER,
            1000,
            100,
            f"model.d_model=96 model.d_ff=384 optim.lr=3e-3 optim.warmup_steps=25 {LINEAR_TO_ZERO}",
        )
    )
    runs.append(command("Enc_mask30_s800", ENCODER, 800, 100, "objective.mlm_probability=0.3"))
    runs.append(command("Enc_mask50_s800", ENCODER, 800, 100, "objective.mlm_probability=0.5"))
    return runs


def round_2() -> list[str]:
    runs = []
    for name in ("d64L2", "d64L4", "d96L4", "d128L2", "d96L2", "d64L3"):
        steps, shape = SHAPES[name]
        for lr in ("6e-3", "1e-2"):
            for warmup in (100, 200):
                runs.append(
                    command(
                        f"R_{name}_s{steps}_lr{lr}_w{warmup}",
                        DECODER,
                        steps,
                        every(steps),
                        f"{shape} optim.lr={lr} optim.warmup_steps={warmup}",
                    )
                )
    for warmup in (200, 300):
        runs.append(command(f"R_d128L4_w{warmup}", DECODER, 500, 50, f"optim.warmup_steps={warmup}"))
    for name, extra in (
        ("swiglu", "model.activation=swiglu model.d_ff=344"),
        ("untied", "model.tie_embeddings=false"),
        ("heads8", "model.n_heads=8"),
    ):
        runs.append(command(f"R_d128L4_{name}", DECODER, 500, 50, extra))
    runs.append(
        command(
            "R_d64L2_b16_s1900_lr4e-3_w200",
            DECODER,
            1900,
            190,
            f"{SHAPES['d64L2'][1]} train.batch_size=16 optim.lr=4e-3 optim.warmup_steps=200",
        )
    )
    runs.append(command("L_d64L2_s4000", DECODER, 4000, 400, SHAPES["d64L2"][1]))
    for steps in (3000, 1500):
        runs.append(command(f"L_d128L4_drop0.1_s{steps}", DECODER, steps, steps // 10, "model.dropout=0.1"))
    for steps, lr in ((800, "2e-3"), (800, "3e-3"), (1000, "3e-3")):
        runs.append(
            command(
                f"Enc_d96_s{steps}_lr{lr}_w100",
                ENCODER,
                steps,
                100,
                f"model.d_model=96 model.d_ff=384 optim.lr={lr}",
            )
        )
    runs.append(
        command(
            "Enc_d64_s1200_lr3e-3_w100", ENCODER, 1200, 100, "model.d_model=64 model.d_ff=256 optim.lr=3e-3"
        )
    )
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round", type=int, choices=(1, 2), required=True)
    args = parser.parse_args()
    runs = round_1() if args.round == 1 else round_2()
    # the longest runs first, so that a parallel pool does not end on them
    runs.sort(
        key=lambda r: (
            0
            if any(
                tag in r
                for tag in ("run_name=D_", "run_name=L_", "run_name=Enc", "run_name=cal_enc", "b16_s")
            )
            else 1
        )
    )
    print("\n".join(runs))


if __name__ == "__main__":
    main()
