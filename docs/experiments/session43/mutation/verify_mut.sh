#!/bin/bash
# apply each surviving mutant (diff from the helper's log), run the test that should now catch it
# Mutates the working tree it runs in (each mutant applied, then reverted): run it in a clean clone.
# From a clone, change the cd below to that clone.
cd /work/main
declare -A T=(
 [M15]="test/test_openai_chat.py::test_a_forced_tool_choice_describes_only_that_tool"
 [M19]="test/test_api_openai.py::test_best_of_equal_to_n_is_accepted"
 [M26]="test/test_api_tasks.py::test_a_refused_fork_keeps_no_copy"
 [M27]="test/test_api_tasks.py::test_a_template_made_from_a_task_reports_finished"
 [M34]="test/test_engine_slots.py::test_shrink_compacts_in_place_and_frees_rows"
 [M36]="test/test_scheduler.py::test_capacity_is_the_next_power_of_two_of_the_tasks"
 [M38]="test/test_task_manager.py::test_reading_a_task_in_memory_makes_it_the_most_recently_used"
 [M45]="test/test_tokenizer.py::test_decode_never_raises"
 [M50]="test/test_sampler.py::test_top_k_zero_with_top_p_one_draws_in_vocabulary_order"
 [M56]="test/test_api_openai.py::test_each_choice_of_a_stream_starts_with_its_role"
)
for m in M15 M19 M26 M27 M34 M36 M38 M45 M50 M56; do
  d=docs/experiments/session43/mutation/mutants/$m.diff  # (from the helper's logs)
  git apply --unidiff-zero $d || { echo "$m: does not apply"; continue; }
  out=$(OMP_NUM_THREADS=1 timeout 300 uv run pytest -n 0 -p no:cacheprovider -q "${T[$m]}" 2>&1 | tail -1)
  echo "$m: $out"
  git apply --unidiff-zero -R $d
done
git status --short server
