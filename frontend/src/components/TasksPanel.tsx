import type { ReactElement } from "react";
import { taskEnded } from "../chat/tasks";
import type { Tasks } from "../hooks/useTasks";
import { TaskRow } from "./TaskRow";

/** The conversation's long-running tool calls: the running ones first, then the ended, newest first. */
export function TasksPanel({ tasks }: { tasks: Tasks }): ReactElement | null {
  if (tasks.tasks.length === 0) return null;
  const order = (ended: boolean): number => (ended ? 1 : 0);
  const sorted = [...tasks.tasks].sort(
    (a, b) => order(taskEnded(a.status)) - order(taskEnded(b.status)) || b.created_at.localeCompare(a.created_at),
  );
  const running = tasks.tasks.filter((t) => !taskEnded(t.status)).length;
  return (
    <section className="tasks-panel" data-testid="tasks-panel" aria-label="Background tasks">
      <h2 className="tasks-heading">
        Background tasks
        {running > 0 && <span className="tasks-count">{running} running</span>}
      </h2>
      <ul className="task-list">
        {sorted.map((task) => (
          <TaskRow
            key={task.id}
            task={task}
            fetchedAt={tasks.fetchedAt}
            action={tasks.actions[task.id]}
            onCancel={tasks.cancel}
            onAnswerInput={tasks.answerInput}
          />
        ))}
      </ul>
    </section>
  );
}
