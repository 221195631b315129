from pathlib import Path

from tests.fakes.fake_endpoint import FakeEndpoint
from tests.loop import scripts
from tests.loop.harness import result_of, solve


def test_solved_run(tmp_path: Path) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        outcome = solve(fake, tmp_path)
    assert outcome.outcome == "solved"
    result = result_of(outcome.run_dir)
    assert result["selected"]["accepted"] is True
