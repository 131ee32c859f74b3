#!/usr/bin/env perl
# sql_reads.pl FILE...: the statements in C files that read an onceq_
# table, for check_style.sh's rule "SELECT on onceq_ tables only in lib/
# or query/". A statement is a run of adjacent string literals, joined (a
# macro between two literals ends one); it reads a table when it names
# one after FROM or JOIN; DELETE FROM names the table it writes, so that
# alone is not a read (the write rule is separate). Comments are skipped.
# Prints FILE:LINE: <the statement's first 70 characters>, one a line.
use strict;
use warnings;

for my $f (@ARGV) {
  open(my $fh, '<', $f) or die "$f: $!\n";
  my $src = do { local $/; <$fh> };
  close $fh;
  # comments out, their newlines kept so that line numbers hold
  $src =~ s{/\*.*?\*/}{ (my $c = $&) =~ s/[^\n]//g; $c }gse;
  $src =~ s{//[^\n]*}{}g;
  while ($src =~ /((?:"(?:[^"\\\n]|\\.)*"\s*)+)/g) {
    my ($lits, $at) = ($1, $-[1]);
    my $sql = join '', $lits =~ /"((?:[^"\\\n]|\\.)*)"/g;
    (my $probe = $sql) =~ s/\bDELETE\s+FROM\s+onceq_\w+//gi;
    next unless $probe =~ /\b(?:FROM|JOIN)\s+onceq_\w+/i;
    my $line = 1 + (substr($src, 0, $at) =~ tr/\n//);
    (my $head = $sql) =~ s/\s+/ /g;
    printf "%s:%d: %.70s\n", $f, $line, $head;
  }
}
