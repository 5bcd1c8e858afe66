#!/bin/sh
# A scripted agent that stalls on a y/N prompt, as a permission prompt does, and
# finishes only once someone answers it at its terminal.
printf 'Overwrite config.txt? [y/N] '
read -r answer
case "$answer" in
  y|Y|yes) echo "overwritten" > config.txt; echo "done" ;;
  *) echo "left alone"; exit 1 ;;
esac
