"""Train HER-DQN on 8-bit flipping, load the trained policy and drive a plain gymnasium env with it.

    python experiments/train_load_evaluate.py
"""
import gymnasium as gym

import her_rl

her_rl.train(["algo=her_dqn", "env=bitflip", "n=8", "eval.success_threshold=1.0", "progress=false", "resume=auto"],
             out_dir="outputs/train-load-evaluate")  # run again: it resumes (solved, it ends at once)
policy = her_rl.load("outputs/train-load-evaluate")
print("greedy evaluation:", her_rl.evaluate(policy, episodes=100))

env = gym.make("her_rl/BitFlip-v0", n=8)  # any single env of the run's kind
obs, info = env.reset(seed=0)
for _ in range(8):
    action, _ = policy.predict(obs, deterministic=True)
    obs, reward, terminated, truncated, info = env.step(action)
    if terminated or truncated:
        break
print("reached the goal:", bool(info["is_success"]))
