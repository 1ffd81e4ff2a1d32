"""Each pitfall `torchdoctor run` measures, on a small CPU program, and its fixed twin: the
pitfall is reported at the line that causes it, with its measurement; the twin is quiet."""

from __future__ import annotations

TRAIN = """
for x, y in loader:
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
"""

EVAL_GRAD = (
    TRAIN
    + """
model.eval()
predictions = []
for x, _ in loader:
    predictions.append(model(x))
"""
)

EVAL_NO_GRAD = (
    TRAIN
    + """
model.eval()
predictions = []
with torch.no_grad():
    for x, _ in loader:
        predictions.append(model(x))
"""
)

EVAL_INFERENCE = EVAL_NO_GRAD.replace("torch.no_grad()", "torch.inference_mode()")


def test_forward_never_backpropagated_is_tdr105_with_bytes(script, td, row) -> None:
    path = script(EVAL_GRAD)
    run = td("run", "--output-format", "json", str(path))
    assert run.code == 1, run.err
    f = run.finding("TDR105")
    assert f["location"] == {"row": row(path, "predictions.append(model(x))"), "column": 24}
    assert f["measured"]["calls"] == 8
    assert f["measured"]["bytes"] > 0
    assert "never backpropagated" in f["message"]
    # The training forward (backpropagated every time) is not reported.
    assert [g["location"]["row"] for g in run.json() if g["code"] == "TDR105"] == [
        row(path, "predictions.append")
    ]


def test_the_same_evaluation_under_no_grad_has_no_tdr105(script, td) -> None:
    run = td("run", "--output-format", "json", str(script(EVAL_NO_GRAD)))
    assert "TDR105" not in run.codes()


def test_no_grad_evaluation_is_tdr106_and_inference_mode_is_quiet(script, td, row) -> None:
    path = script(EVAL_NO_GRAD)
    run = td("run", "--output-format", "json", str(path))
    f = run.finding("TDR106")
    assert f["location"]["row"] == row(path, "predictions.append(model(x))")
    assert f["measured"]["calls"] == 8
    fixed = td("run", "--output-format", "json", str(script(EVAL_INFERENCE)))
    assert fixed.code == 0, fixed.out + fixed.err
    assert fixed.json() == []


def test_loss_summed_with_its_graph_is_tdr103_at_the_sum(script, td, row) -> None:
    body = """
    total = 0
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss
    print(float(total))
    """
    path = script(body)
    run = td("run", "--output-format", "json", str(path))
    f = run.finding("TDR103")
    assert f["location"]["row"] == row(path, "total += loss")
    assert "`total`" in f["message"]
    assert f["measured"]["count"] >= 8  # graphs of earlier iterations alive
    fixed = td(
        "run", "--output-format", "json", str(script(body.replace("+= loss", "+= loss.item()")))
    )
    assert "TDR103" not in fixed.codes()


def test_losses_appended_with_their_graph_are_tdr103(script, td, row) -> None:
    body = """
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss)
    """
    path = script(body)
    run = td("run", "--output-format", "json", str(path))
    assert run.finding("TDR103")["location"]["row"] == row(path, "losses.append(loss)")
    fixed = td(
        "run",
        "--output-format",
        "json",
        str(script(body.replace("append(loss)", "append(loss.detach())"))),
    )
    assert "TDR103" not in fixed.codes()


def test_item_every_step_is_a_host_device_sync(script, td, row) -> None:
    body = """
    running = torch.zeros(())
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss.detach()
        LOG
    print(running.item())
    """
    path = script(body.replace("LOG", 'print(f"loss {loss.item():.4f}")'))
    run = td("run", "--output-format", "json", str(path))
    f = run.finding("TDR408")
    assert f["location"]["row"] == row(path, "loss.item():.4f")
    assert f["measured"]["count"] == 8
    assert f["measured"]["per_step"] == 1.0
    assert f["name"] == "host-device-sync-in-loop"
    assert f["url"].endswith("/run/#what-is-measured")  # no rule page: the page of `run`
    fixed = td("run", "--output-format", "json", str(script(body.replace("LOG", "pass"))))
    assert "TDR408" not in fixed.codes()


def test_printing_a_tensor_every_step_is_a_sync(script, td, row) -> None:
    path = script(TRAIN.replace("optimizer.step()", "optimizer.step()\n    print(loss)"))
    run = td("run", "--output-format", "json", str(path))
    f = run.finding("TDR408")
    assert f["location"]["row"] == row(path, "print(loss)")
    assert "printing a tensor" in f["message"]


SLOW_DATA = """
import time


class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, i):
        time.sleep(0.02)
        return torch.full((8,), float(i)), torch.ones(1)


if __name__ == "__main__":
    slow = DataLoader(Slow(), batch_size=2, num_workers=WORKERS)
    for x, y in slow:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
"""


def test_waiting_for_batches_without_workers_is_tdr310(script, td, row) -> None:
    path = script(SLOW_DATA.replace("WORKERS", "0"))
    run = td("run", "--output-format", "json", str(path))
    f = run.finding("TDR310")
    assert f["location"]["row"] == row(path, "for x, y in slow:")
    assert f["measured"]["share"] >= 0.5  # sleeping in __getitem__ dominates a tiny model
    assert f["measured"]["count"] == 12
    assert "num_workers=0" in f["message"]
    fixed = td("run", "--output-format", "json", str(script(SLOW_DATA.replace("WORKERS", "2"))))
    assert "TDR310" not in fixed.codes()


SAMPLER = """
from torch.utils.data import DistributedSampler

sampler = DistributedSampler(dataset, num_replicas=2, rank=0, seed=1)
shards = DataLoader(dataset, batch_size=4, sampler=sampler)
for epoch in range(3):
    SET_EPOCH
    for x, y in shards:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
"""


def test_same_sampler_order_every_epoch_is_tdr502(script, td, row) -> None:
    path = script(SAMPLER.replace("SET_EPOCH", "pass"))
    run = td("run", "--output-format", "json", str(path))
    f = run.finding("TDR502")
    assert f["location"]["row"] == row(path, "for x, y in shards:")
    assert f["measured"]["count"] == 3
    fixed = td(
        "run",
        "--output-format",
        "json",
        str(script(SAMPLER.replace("SET_EPOCH", "sampler.set_epoch(epoch)"))),
    )
    assert "TDR502" not in fixed.codes()


SCHEDULER = """
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2)
for epoch in range(2):
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        PER_BATCH
    PER_EPOCH
"""


def test_epoch_scheduler_stepped_every_batch_is_tdr703(script, td, row) -> None:
    path = script(SCHEDULER.replace("PER_BATCH", "scheduler.step()").replace("PER_EPOCH", "pass"))
    run = td("run", "--output-format", "json", str(path))
    f = run.finding("TDR703")
    assert f["location"]["row"] == row(path, "scheduler.step()")
    assert f["measured"]["count"] == 16
    assert f["measured"]["steps"] == 16
    fixed = td(
        "run",
        "--output-format",
        "json",
        str(
            script(SCHEDULER.replace("PER_BATCH", "pass").replace("PER_EPOCH", "scheduler.step()"))
        ),
    )
    assert "TDR703" not in fixed.codes()
    # A step size of 1,000 or more counts iterations: stepping it per batch is intended.
    by_iterations = SCHEDULER.replace("step_size=2", "step_size=5000")
    body = by_iterations.replace("PER_BATCH", "scheduler.step()").replace("PER_EPOCH", "pass")
    iterations = td("run", "--output-format", "json", str(script(body)))
    assert "TDR703" not in iterations.codes()


def test_per_iteration_scheduler_stepped_every_epoch_is_tdr703(script, td, row) -> None:
    one_cycle = SCHEDULER.replace(
        "StepLR(optimizer, step_size=2)", "OneCycleLR(optimizer, max_lr=0.1, total_steps=40)"
    )
    path = script(one_cycle.replace("PER_BATCH", "pass").replace("PER_EPOCH", "scheduler.step()"))
    run = td("run", "--output-format", "json", str(path))
    f = run.finding("TDR703")
    assert f["measured"]["count"] == 2
    assert "one per optimizer step" in f["message"]
    fixed = td(
        "run",
        "--output-format",
        "json",
        str(
            script(one_cycle.replace("PER_BATCH", "scheduler.step()").replace("PER_EPOCH", "pass"))
        ),
    )
    assert "TDR703" not in fixed.codes()


ACCUMULATE = """
for i, (x, y) in enumerate(loader):
    ZERO_BEFORE
    (nn.functional.mse_loss(model(x), y) / 2).backward()
    if (i + 1) % 2 == 0:
        optimizer.step()
        ZERO_AFTER
"""


def test_zero_grad_every_iteration_under_accumulation_is_tdr107(script, td, row) -> None:
    path = script(
        ACCUMULATE.replace("ZERO_BEFORE", "optimizer.zero_grad()").replace("ZERO_AFTER", "pass")
    )
    run = td("run", "--output-format", "json", str(path))
    f = run.finding("TDR107")
    assert f["location"]["row"] == row(path, "optimizer.zero_grad()")
    assert f["measured"]["count"] == 4  # every second backward's gradients are wiped
    fixed = td(
        "run",
        "--output-format",
        "json",
        str(
            script(
                ACCUMULATE.replace("ZERO_BEFORE", "pass").replace(
                    "ZERO_AFTER", "optimizer.zero_grad()"
                )
            )
        ),
    )
    assert fixed.code == 0, fixed.out + fixed.err
    assert fixed.json() == []


COMPILED = """
import torch._dynamo.utils


@torch.compile(backend="eager")
def scaled(x):
    y = x * 2
    BREAK
    return y.sum()


compiled_model = torch.compile(model, backend="eager")
for x, y in loader:
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(compiled_model(x), y) + scaled(x)
    loss.backward()
    optimizer.step()
    print(f"loss {loss.item():.8f}")
counters = torch._dynamo.utils.counters
print("breaks", sorted(counters["graph_break"].values()), dict(counters["stats"]))
"""


def test_graph_breaks_under_torch_compile_are_tdr202(script, td, row, tmp_path) -> None:
    import subprocess
    import sys

    path = script(COMPILED.replace("BREAK", 'print("in the compiled function")'))
    run = td("run", str(path))
    f = [line for line in run.out.splitlines() if ": TDR202 " in line]
    assert len(f) == 1, run.out + run.err
    assert f[0].startswith(f"train.py:{row(path, 'def scaled') - 1}:2: TDR202 Measured:")
    assert "Failed to trace builtin operator" in f[0]
    # The instrumentation adds no graph break and changes no loss.
    plain = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=180
    )
    printed = [line for line in plain.stdout.splitlines() if line.startswith(("loss", "breaks"))]
    assert len(printed) == 9
    assert [line for line in run.out.splitlines() if line.startswith(("loss", "breaks"))] == printed
    fixed = td("run", "--output-format", "json", str(script(COMPILED.replace("BREAK", "pass"))))
    assert "TDR202" not in fixed.codes()


def test_one_small_forward_is_not_worth_a_finding(script, td) -> None:
    # torch.jit.trace runs the model once with autograd on and once more under no_grad.
    body = """
    traced = torch.jit.trace(model, torch.randn(2, 8))
    print(traced(torch.ones(2, 8)).sum().item())
    """
    run = td("run", "--output-format", "json", str(script(body)))
    assert run.code == 0, run.out + run.err
    assert run.json() == []
