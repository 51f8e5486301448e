"""Fault campaign of issue 15: concurrent readers, full disks, damaged chunks, signals, extreme inputs.

Each module holds the tests of one kind of fault; every test failed before its fix. The tally of the
campaign (cases, kills, bitwise-equal resumes) is in ``docs/reliability.md``.
"""
