#!/usr/bin/env python
"""Extract 20250416_amc_aime_website rows from math.parquet and split into train/test."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd


DEFAULT_SOURCE = "20250416_amc_aime_website"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(
            "Extract rows with data_source=20250416_amc_aime_website from math.parquet "
            "and write aime_train.parquet / aime_test.parquet."
        )
    )
    parser.add_argument(
        "--input",
        default="math.parquet",  # 原始数据路径
        help="Input parquet path. Default: math.parquet",
    )
    parser.add_argument(
        "--train-output",
        default="aime_train.parquet",  # 训练集输出路径
        help="Train parquet path. Default: aime_train.parquet",
    )
    parser.add_argument(
        "--test-output",
        default="aime_test.parquet",  # 测试集输出路径
        help="Test parquet path. Default: aime_test.parquet",
    )
    parser.add_argument(
        "--test-size",
        type=int,
        default=60,  # 默认选取60条数据作为测试集
        help="Number of rows in aime_test.parquet. Default: 60",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=42,
        help="Random seed for the train/test split. Default: 42",
    )
    parser.add_argument(
        "--source",
        default=DEFAULT_SOURCE,
        help=f"data_source value to keep. Default: {DEFAULT_SOURCE}",
    )
    return parser.parse_args()


def set_split(extra_info: object, split: str) -> dict:
    info = dict(extra_info) if isinstance(extra_info, dict) else {}
    info["split"] = split
    if "index" not in info:
        info["index"] = 0
    return info


def main() -> None:
    args = parse_args()
    if args.test_size < 0:
        raise ValueError(f"--test-size must be >= 0, got {args.test_size}")

    input_path = Path(args.input)
    train_path = Path(args.train_output)
    test_path = Path(args.test_output)

    df = pd.read_parquet(input_path)
    if "data_source" not in df.columns:
        raise ValueError(f"Column 'data_source' not found in {input_path}")

    selected = df[df["data_source"] == args.source].copy()
    n_selected = len(selected)
    if n_selected == 0:
        raise ValueError(f"No rows with data_source={args.source!r} in {input_path}")
    if args.test_size > n_selected:
        raise ValueError(
            f"--test-size={args.test_size} exceeds selected rows {n_selected}"
        )

    shuffled = selected.sample(frac=1.0, random_state=args.seed).reset_index(drop=True)
    test_df = shuffled.iloc[: args.test_size].copy()
    train_df = shuffled.iloc[args.test_size :].copy()

    if "extra_info" in test_df.columns:
        test_df["extra_info"] = test_df["extra_info"].map(lambda x: set_split(x, "test"))
        train_df["extra_info"] = train_df["extra_info"].map(lambda x: set_split(x, "train"))

    train_path.parent.mkdir(parents=True, exist_ok=True)
    test_path.parent.mkdir(parents=True, exist_ok=True)
    train_df.to_parquet(train_path, index=False)
    test_df.to_parquet(test_path, index=False)

    print(f"Input: {input_path}")
    print(f"Source: {args.source}")
    print(f"Selected rows: {n_selected}")
    print(f"Seed: {args.seed}")
    print(f"Train rows: {len(train_df)} -> {train_path}")
    print(f"Test rows:  {len(test_df)} -> {test_path}")


if __name__ == "__main__":
    main()
